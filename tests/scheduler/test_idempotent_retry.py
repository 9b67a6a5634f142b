"""A retry under a used idempotency key must ask for what the first request asked for."""

from __future__ import annotations

import grpc
import pytest

from covel.common.v1 import common_pb2
from covel.store.v1 import store_pb2
from services.scheduler.turn.idempotent_retry import check_retry, retry_mismatch
from services.scheduler.turn.request import ManualRun, TurnRequest
from shared.errors import ServiceError


def _action(text: str) -> common_pb2.PlayerAction:
    return common_pb2.PlayerAction(seat_id="main", kind="do", text=text, source="player")


def _recorded(**fields) -> store_pb2.Turn:
    return store_pb2.Turn(id="turn-1", idempotency_key="k", **fields)


def test_the_same_request_is_a_retry() -> None:
    recorded = _recorded(actions=[_action("open the door")])
    assert retry_mismatch(recorded, TurnRequest.player("s", [_action("open the door")], "k")) == ""


def test_other_actions_are_refused_naming_the_turn() -> None:
    recorded = _recorded(actions=[_action("open the door")])
    with pytest.raises(ServiceError) as refused:
        check_retry(recorded, TurnRequest.player("s", [_action("burn the door")], "k"))
    assert refused.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert "turn-1" in refused.value.message and "actions differ" in refused.value.message


def test_another_origin_or_manual_runtime_is_refused() -> None:
    manual = _recorded(origin="manual", runtime_results=[store_pb2.RuntimeResult(runtime_id="p.tick")])
    assert retry_mismatch(manual, TurnRequest("s", "k", ManualRun("p.tick", {}), origin="manual")) == ""
    assert "did not run runtime" in retry_mismatch(manual, TurnRequest("s", "k", ManualRun("p.other", {}), origin="manual"))
    assert "manual turn" in retry_mismatch(manual, TurnRequest.player("s", [_action("x")], "k"))

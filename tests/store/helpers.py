"""Small builders and calls the store tests share."""

from __future__ import annotations

import uuid
from typing import Any

import grpc
import pytest

from covel.common.v1 import common_pb2
from covel.store.v1 import store_pb2
from shared.errors import field_violations
from shared.structs import to_struct


async def expect_error(code: grpc.StatusCode, call) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    assert caught.value.code() == code, caught.value.details()
    return caught.value


def violated_fields(error: grpc.aio.AioRpcError) -> list[str]:
    return [violation.field for violation in field_violations(error)]



async def new_session(stub, **fields: Any) -> store_pb2.Session:
    reply = await stub.CreateSession(store_pb2.CreateSessionRequest(session=store_pb2.Session(**fields)))
    return reply.session


async def acquire(stub, session_id: str, **fields: Any) -> store_pb2.AcquireTurnLeaseResponse:
    fields.setdefault("holder", "test")
    return await stub.AcquireTurnLease(store_pb2.AcquireTurnLeaseRequest(session_id=session_id, **fields))


def story_result(runtime_id: str = "narrator", plugin_id: str = "story-plugin") -> store_pb2.RuntimeResult:
    return store_pb2.RuntimeResult(runtime_id=runtime_id, plugin_id=plugin_id, status="success", story=True)


def story_proposal(text_: str, runtime_id: str = "narrator", plugin_id: str = "story-plugin", **payload: Any) -> store_pb2.Proposal:
    return store_pb2.Proposal(
        id=str(uuid.uuid4()),
        type="narrative.append",
        plugin_id=plugin_id,
        runtime_id=runtime_id,
        unit_runtime_id=runtime_id,
        payload=to_struct({"text": text_, **payload}),
    )


def data_proposal(namespace: str, key: str, value: Any, plugin_id: str = "memory", runtime_id: str = "recorder") -> store_pb2.Proposal:
    return store_pb2.Proposal(
        id=str(uuid.uuid4()),
        type="plugin.data",
        plugin_id=plugin_id,
        runtime_id=runtime_id,
        unit_runtime_id=runtime_id,
        payload=to_struct({"namespace": namespace, "key": key, "value": value}),
    )


def turn_for(
    lease: store_pb2.TurnLease,
    status: int = store_pb2.TURN_STATUS_COMMITTED,
    player_message: str = "I open the door.",
    **fields: Any,
) -> store_pb2.Turn:
    fields.setdefault("origin", "player")
    fields.setdefault("actions", [common_pb2.PlayerAction(seat_id="p1", kind="do", text=player_message, source="player")])
    return store_pb2.Turn(
        id=lease.turn_id, session_id=lease.session_id, status=status, player_message=player_message, **fields
    )


async def commit(stub, lease: store_pb2.TurnLease, turn: store_pb2.Turn, proposals=(), release: bool = True) -> store_pb2.CommitTurnResponse:
    return await stub.CommitTurn(
        store_pb2.CommitTurnRequest(
            session_id=lease.session_id, lease_id=lease.lease_id, turn=turn, proposals=list(proposals), release_lease=release
        )
    )


async def play_turn(stub, session_id: str, story: str, idempotency_key: str = "", player_message: str = "I look around.") -> store_pb2.CommitTurnResponse:
    lease = (await acquire(stub, session_id, idempotency_key=idempotency_key)).lease
    turn = turn_for(lease, player_message=player_message, idempotency_key=idempotency_key, runtime_results=[story_result()])
    return await commit(stub, lease, turn, [story_proposal(story)])


def proposal(type_: str, payload: dict[str, Any], plugin_id: str = "memory", runtime_id: str = "recorder", unit: str = "") -> store_pb2.Proposal:
    return store_pb2.Proposal(
        id=str(uuid.uuid4()),
        type=type_,
        plugin_id=plugin_id,
        runtime_id=runtime_id,
        unit_runtime_id=unit or runtime_id,
        payload=to_struct(payload),
    )


async def commit_turn(stub, session_id: str, proposals=(), story: str = "The tide turns.", **request_fields: Any) -> store_pb2.CommitTurnResponse:
    """A committed player turn with a story plus `proposals`; extra CommitTurnRequest fields as given."""
    lease = (await acquire(stub, session_id)).lease
    results = request_fields.pop("runtime_results", [story_result()])
    trace = request_fields.pop("trace", [])
    turn = turn_for(lease, runtime_results=results, trace=[to_struct(entry) for entry in trace])
    items = ([story_proposal(story)] if story else []) + list(proposals)
    return await stub.CommitTurn(
        store_pb2.CommitTurnRequest(
            session_id=session_id, lease_id=lease.lease_id, turn=turn, proposals=items, release_lease=True, **request_fields
        )
    )


def outcomes_by_id(turn: store_pb2.Turn) -> dict[str, store_pb2.ProposalOutcome]:
    return {outcome.proposal_id: outcome for outcome in turn.proposal_outcomes}


async def plugin_data(stub, session_id: str, plugin_id: str = "", namespace: str = "") -> dict[tuple[str, str], Any]:
    from shared.structs import from_value

    entries = (await stub.ListPluginData(store_pb2.ListPluginDataRequest(session_id=session_id, plugin_id=plugin_id, namespace=namespace))).entries
    return {(entry.namespace, entry.key): from_value(entry.value) for entry in entries}

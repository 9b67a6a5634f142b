"""Dimension settlement through the five services: tide-tracker (a trusted dimension maintainer, an agent that
finishes with update-dimensions) settles the world's tide after each story. When it fails, the turn keeps an open
receipt; before the next action the kernel retries it once by itself; still open, the action is
FAILED_PRECONDITION until ResolveSettlement retries it (or closes it as handled / skipped). Its context probe
reads session.world-context@1: the kernel's host-verified part and the plugin's provider part."""

from __future__ import annotations

import json
import os
from typing import Any, cast

import grpc
import pytest
import pytest_asyncio

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from shared.grpc_client import open_channel
from shared.settings import REPO_ROOT
from shared.structs import from_value
from tests.e2e.conftest import NON_STORY_CORE_PLUGINS, restart_gateway, running_services

TRUSTED = REPO_ROOT / "tests" / "fixtures" / "trusted-plugins"
COVE = """\
name: Cove
dimensions:
  tide: {name: Tide, schema: {enum: [low, high]}, initial: low}
pluginPolicy: {plus: [tide-tracker]}
"""
SLOT = "tide-tracker"
FAILS = {"error": {"status": 400, "message": "the tracker's model refused"}}


def settles(*updates: tuple[str, str]) -> dict:
    return {"tool_calls": [{"name": "update-dimensions", "arguments": {"updates": [{"id": i, "value": v} for i, v in updates]}}]}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def cove(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("settlement")
    (tmp_path / "data").mkdir()
    worlds = tmp_path / "worlds"
    (worlds / "cove").mkdir(parents=True)
    (worlds / "cove" / "world.yaml").write_text(COVE, encoding="utf-8")
    env = {"COVEL_WORLD_DIRS": str(worlds), "COVEL_BUILTIN_PLUGIN_DIRS": os.pathsep.join([str(REPO_ROOT / "plugins"), str(TRUSTED)])}
    async with running_services(tmp_path / "data", plugin_dirs=(TRUSTED,), extra_env=env, script={}) as group, \
            open_channel(group.addrs["scheduler"]) as channel, group.channel_as("store", "scheduler") as store_channel:
        yield group, scheduler_pb2_grpc.SchedulerStub(channel), store_pb2_grpc.TransactionalStoreStub(store_channel)


async def start(stub) -> str:
    session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(
        world_id="cove", excluded_plugins=NON_STORY_CORE_PLUGINS, approved_plugins=["tide-tracker"]))).session
    return session.id


async def act(stub, session_id: str, text: str):
    request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[resources_pb2.PlayerAction(kind="act", text=text)])
    return [event async for event in stub.SubmitActions(request)][-1].turn_completed


async def tide(store, session_id: str) -> tuple[str, int]:
    world = await store.GetWorld(store_pb2.GetWorldRequest(session_id=session_id))
    return next((from_value(d.value), d.version) for d in world.dimensions if d.id == "tide")


async def receipts(stub, session_id: str, include_closed: bool = False) -> list:
    reply = await stub.ListSettlements(scheduler_pb2.ListSettlementsRequest(session_id=session_id, include_closed=include_closed))
    return list(reply.settlements)


async def test_a_failed_settlement_is_retried_then_blocks_until_resolved(cove) -> None:
    group, stub, store = cove
    await restart_gateway(group, {"queues": {SLOT: [settles(("tide", "high")), FAILS, FAILS, settles(), FAILS, settles(("tide", "low")),
                                                    settles()]}})
    session_id = await start(stub)
    first = await act(stub, session_id, "I watch the sea.")
    assert first.status == store_pb2.TURN_STATUS_COMMITTED
    assert await tide(store, session_id) == ("high", 2) and await receipts(stub, session_id) == []

    failed = await act(stub, session_id, "I wait.")  # the tracker fails: the turn commits, its receipt stays open
    assert failed.status == store_pb2.TURN_STATUS_COMMITTED
    [receipt] = await receipts(stub, session_id)
    assert (receipt.source_turn_id, receipt.runtime_id, receipt.status, receipt.attempts) == (failed.id, "tide-tracker/tracker", resources_pb2.SETTLEMENT_STATUS_PENDING, 0)
    assert "refused" in receipt.last_error

    with pytest.raises(grpc.aio.AioRpcError) as blocked:  # the kernel's own retry fails too: the action waits
        await act(stub, session_id, "I walk on.")
    assert blocked.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert failed.id in blocked.value.details() and "ResolveSettlement" in blocked.value.details()
    [receipt] = await receipts(stub, session_id)
    assert (receipt.status, receipt.attempts) == (resources_pb2.SETTLEMENT_STATUS_PENDING, 1)

    resolved = await stub.ResolveSettlement(scheduler_pb2.ResolveSettlementRequest(
        session_id=session_id, source_turn_id=failed.id, runtime_id="tide-tracker/tracker", resolution=resources_pb2.SETTLEMENT_RESOLUTION_RETRY))
    assert (resolved.settlement.status, resolved.settlement.attempts, resolved.turn.origin) == (resources_pb2.SETTLEMENT_STATUS_SETTLED, 2, resources_pb2.TURN_ORIGIN_SETTLEMENT)
    assert resolved.settlement.resolved_turn_id == resolved.turn.id and resolved.turn.source_turn_id == failed.id
    assert await receipts(stub, session_id) == []

    again = await act(stub, session_id, "I walk on.")  # plays; its tracker fails: a new open receipt
    [receipt] = await receipts(stub, session_id)
    assert receipt.source_turn_id == again.id
    played = await act(stub, session_id, "I sit down.")  # the kernel's retry settles it; the action plays at once
    assert played.status == store_pb2.TURN_STATUS_COMMITTED and played.player_message.endswith("I sit down.")
    assert await receipts(stub, session_id) == [] and await tide(store, session_id) == ("low", 3)
    closed = await receipts(stub, session_id, include_closed=True)
    assert {(r.source_turn_id, r.status) for r in closed} == {(failed.id, resources_pb2.SETTLEMENT_STATUS_SETTLED), (again.id, resources_pb2.SETTLEMENT_STATUS_SETTLED)}


async def test_a_receipt_closed_by_hand_is_never_settled_again(cove) -> None:
    group, stub, store = cove
    await restart_gateway(group, {"queues": {SLOT: [FAILS, FAILS, settles()]}})
    session_id = await start(stub)
    failed = await act(stub, session_id, "I wait.")
    with pytest.raises(grpc.aio.AioRpcError) as blocked:
        await act(stub, session_id, "I walk on.")
    assert blocked.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    request = scheduler_pb2.ResolveSettlementRequest(session_id=session_id, source_turn_id=failed.id, runtime_id="tide-tracker/tracker",
                                                     resolution=resources_pb2.SETTLEMENT_RESOLUTION_SKIPPED)
    assert (await stub.ResolveSettlement(request)).settlement.status == resources_pb2.SETTLEMENT_STATUS_SKIPPED
    for resolution in (resources_pb2.SETTLEMENT_RESOLUTION_SKIPPED, resources_pb2.SETTLEMENT_RESOLUTION_RETRY):
        request.resolution = resolution
        with pytest.raises(grpc.aio.AioRpcError) as closed:
            await stub.ResolveSettlement(request)
        assert closed.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "skipped" in closed.value.details()
    request.resolution = cast(Any, 9)
    with pytest.raises(grpc.aio.AioRpcError) as bad:
        await stub.ResolveSettlement(request)
    assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "resolution" in bad.value.details()
    request.resolution, request.source_turn_id = resources_pb2.SETTLEMENT_RESOLUTION_HANDLED, "no-such-turn"
    with pytest.raises(grpc.aio.AioRpcError) as missing:
        await stub.ResolveSettlement(request)
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND
    assert (await act(stub, session_id, "I walk on.")).status == store_pb2.TURN_STATUS_COMMITTED
    assert await tide(store, session_id) == ("low", 1)


async def test_the_world_context_holds_the_kernels_part_and_the_providers(cove) -> None:
    """An editor (a manual runtime) runs while a receipt is open and reads it from session.world-context@1."""
    group, stub, store = cove
    await restart_gateway(group, {"queues": {SLOT: [settles(("tide", "high")), FAILS]}})
    session_id = await start(stub)
    await act(stub, session_id, "I watch the sea.")
    failed = await act(stub, session_id, "I wait.")
    events = [event async for event in stub.RunManual(scheduler_pb2.RunManualRequest(
        session_id=session_id, runtime_id="tide-tracker/context-probe"))]
    [result] = [r for r in events[-1].turn_completed.runtime_results if r.runtime_id == "tide-tracker/context-probe"]
    context = json.loads(result.output_json)
    assert context["worldId"] == "cove" and context["dimensions"] == {"tide": {"value": "high", "version": 2}}
    assert [(p["sourceTurnId"], p["runtimeId"], p["status"]) for p in context["pendingSettlements"]] == [
        (failed.id, "tide-tracker/tracker", "pending")]
    assert "refused" in context["pendingSettlements"][0]["lastError"] and "input" not in context["pendingSettlements"][0]
    assert context["context"] == {"tide-tracker": {"tideRead": "high", "open": 1}}

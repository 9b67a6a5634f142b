"""ctx.recursive_call: the nested run's context, and its writes (plugin data, tool proposals, write
services' staged changes) following the parent's fate, through all five services."""

from __future__ import annotations

import pytest

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from shared.grpc_client import open_channel
from shared.structs import from_struct

# Only sessions of its own: the session's default group will do (tests/e2e/conftest.py).
SHARED_SERVICES = True

pytestmark = pytest.mark.asyncio(loop_scope="session")
PLUGINS = ["nest-probe", "service-probe"]


async def test_nested_writes_commit_with_a_successful_parent_only(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel, services.channel_as("store", "scheduler") as store_channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        store = store_pb2_grpc.TransactionalStoreStub(store_channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(requested_plugins=PLUGINS, approved_plugins=PLUGINS))).session
        events = [e async for e in stub.SubmitActions(scheduler_pb2.SubmitActionsRequest(
            session_id=session.id, actions=[resources_pb2.PlayerAction(text="I nest.")]))]
        own = (await store.ListPluginData(store_pb2.ListPluginDataRequest(session_id=session.id, plugin_id="nest-probe"))).entries
        ledger = (await store.ListPluginData(store_pb2.ListPluginDataRequest(session_id=session.id, plugin_id="service-probe"))).entries
    turn = events[-1].turn_completed
    results = {r.runtime_id: r for r in turn.runtime_results}
    keeper = results["nest-probe/keeper"]
    assert keeper.status == resources_pb2.RUNTIME_STATUS_SUCCESS, keeper.reason
    assert from_struct(keeper.output) == {
        "child": {"origin": "recursive", "actions": [], "depth": 1, "message": "A message for the child."}, "origin": "player", "actions": 1,
    }, "a nested run's origin is recursive and it has no player actions; its parent keeps the turn's"
    follower = results["nest-probe/follower"]
    assert from_struct(follower.output) == {"actions": [], "origin": "player"}, "an event run has no player actions"
    assert results["nest-probe/failer"].status == resources_pb2.RUNTIME_STATUS_FAILED
    assert (results["nest-probe/flipped"].status, results["nest-probe/flipped"].reason) == (resources_pb2.RUNTIME_STATUS_FAILED, "nest-probe turned it failed")
    assert results["nest-probe/revived"].status == resources_pb2.RUNTIME_STATUS_SUCCESS, "a PostRuntime hook turned the failure into a success"

    # Only the keeper's nested run committed: its plugin data, its tool's proposal and its write service's change.
    assert sorted((e.namespace, e.key) for e in own) == [("nested", "keeper"), ("tool-marks", "keeper")]
    assert [(e.namespace, e.key) for e in ledger] == [("ledger", "keeper")]

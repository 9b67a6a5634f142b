"""PreStateCommit abort: the rejected write takes its whole commit unit down (the top-level runtime
with its nested calls), and the runtimes that read it; the other units commit (spec: 提交单元).
A story unit's abort rolls the whole turn back: tests/e2e/test_hook_rules.py."""

from __future__ import annotations

import pytest

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from shared.grpc_client import open_channel

# Its own sessions only: the session's shared group (tests/e2e/conftest.py).
SHARED_SERVICES = True

pytestmark = pytest.mark.asyncio(loop_scope="session")
PROBE = "veto-probe"
REJECTED, DISCARDED, COMMITTED = (store_pb2.PROPOSAL_STATUS_REJECTED, store_pb2.PROPOSAL_STATUS_DISCARDED,
                                  store_pb2.PROPOSAL_STATUS_COMMITTED)


async def test_a_vetoed_write_discards_its_whole_unit_and_its_readers(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel, services.channel_as("store", "scheduler") as store_channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        store = store_pb2_grpc.TransactionalStoreStub(store_channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(
            requested_plugins=[PROBE], approved_plugins=[PROBE]))).session
        events = [e async for e in stub.SubmitActions(scheduler_pb2.SubmitActionsRequest(
            session_id=session.id, actions=[resources_pb2.PlayerAction(kind="do", text="I write.")]))]
        data = (await store.ListPluginData(store_pb2.ListPluginDataRequest(session_id=session.id, plugin_id=PROBE))).entries
    turn = events[-1].turn_completed
    assert turn.status == store_pb2.TURN_STATUS_COMMITTED, turn.abort_reason
    assert {r.runtime_id: r.status for r in turn.runtime_results if r.plugin_id == PROBE} == {
        "veto-probe/writer": resources_pb2.RUNTIME_STATUS_SUCCESS, "veto-probe/bystander": resources_pb2.RUNTIME_STATUS_SUCCESS,
        "veto-probe/reader": resources_pb2.RUNTIME_STATUS_SUCCESS}

    # Only the bystander's unit committed: not notes/a nor the nested notes/child, though only notes/b was vetoed.
    assert [(e.namespace, e.key) for e in data] == [("other", "x")]

    outcomes = list(turn.proposal_outcomes)
    [rejected] = [o for o in outcomes if o.status == REJECTED]
    assert rejected.code == "hook-aborted"
    assert rejected.reason == "PreStateCommit hook of veto-probe aborted it: veto-probe refuses notes/b"
    rolled_back = [o for o in outcomes if o.code == "unit-rolled-back"]
    assert len(rolled_back) == 2 and all(o.status == DISCARDED for o in rolled_back), outcomes
    assert all(f"unit veto-probe/writer rolled back: proposal {rejected.proposal_id} was rejected" == o.reason for o in rolled_back)
    [read] = [o for o in outcomes if o.code == "read-dependency"]
    assert (read.status, read.reason) == (DISCARDED, "read data of veto-probe/writer that did not commit")
    assert [o.status for o in outcomes].count(COMMITTED) >= 1, "the bystander's write"
    # The client saw each outcome as the commit decided it, the veto's reason included.
    streamed = [e.proposal for e in events if e.WhichOneof("event") == "proposal"]
    assert {(o.proposal_id, o.status, o.reason) for o in streamed} == {(o.proposal_id, o.status, o.reason) for o in outcomes}
    discarded = {unit.unit_runtime_id: unit.reason for unit in turn.discarded_units}
    assert discarded["veto-probe/writer"] == (
        f"proposal {rejected.proposal_id} (plugin.data) was rejected: PreStateCommit hook of veto-probe aborted it: veto-probe refuses notes/b")
    assert discarded["veto-probe/reader"] == "read data of veto-probe/writer that did not commit"


async def test_a_reader_of_characters_goes_with_the_upstream_that_wrote_them(services) -> None:
    """cast-probe/writer proposes a character; reader reads ctx.world.characters (the preview shows it), bystander
    does not. When the store refuses the character (a stale expectedVersion), the reader's write goes too; the
    bystander's stays. When the character commits, both do (spec: 实际读取 characters 会记录上游生产者)."""
    async with open_channel(services.addrs["scheduler"]) as channel, services.channel_as("store", "scheduler") as store_channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        store = store_pb2_grpc.TransactionalStoreStub(store_channel)
        results = {}
        for text in ("I wait, stale.", "I wait."):
            session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(
                requested_plugins=["cast-probe"], approved_plugins=["cast-probe"]))).session
            events = [e async for e in stub.SubmitActions(scheduler_pb2.SubmitActionsRequest(
                session_id=session.id, actions=[resources_pb2.PlayerAction(kind="act", text=text)]))]
            data = (await store.ListPluginData(store_pb2.ListPluginDataRequest(session_id=session.id, plugin_id="cast-probe"))).entries
            turn = events[-1].turn_completed
            results[text] = (sorted(e.key for e in data), {u.unit_runtime_id: u.reason for u in turn.discarded_units}, turn)
    kept, discarded, turn = results["I wait, stale."]
    reader = next(r for r in turn.runtime_results if r.runtime_id == "cast-probe/reader")
    assert "Newcomer" in reader.output_json, "the reader saw the upstream character in its preview"
    assert kept == ["bystander"]
    assert discarded["cast-probe/reader"] == "read data of cast-probe/writer that did not commit"
    assert "cast-probe/bystander" not in discarded
    assert results["I wait."][0] == ["bystander", "reader"] and not results["I wait."][1]

"""schedule.background (divergence 4 of issue 40): a background runtime runs as a job outside the turn's graph and its
caller does not wait. An event follower marked background is queued with the events that activated it and runs
after the turn commits (origin `background`); a manual runtime marked background answers RunManual with its turn id
at once, even when the request does not ask for the background."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from services.scheduler.turn.detached_jobs import BACKGROUND_QUEUED
from shared.grpc_client import open_channel
from shared.structs import from_struct
from tests.e2e.conftest import minimal_session

pytestmark = pytest.mark.asyncio(loop_scope="session")
SHARED_SERVICES = True


async def _background_turn(stub, session_id: str, runtime_id: str) -> resources_pb2.Turn:
    """The committed background turn that ran `runtime_id` (polled: a worker claims the job after the commit)."""
    for _ in range(600):
        turns = (await stub.ListTurns(scheduler_pb2.ListTurnsRequest(session_id=session_id))).turns
        found = [t for t in turns if t.origin == resources_pb2.TURN_ORIGIN_BACKGROUND and t.status == resources_pb2.TURN_STATUS_COMMITTED
                 and any(r.runtime_id == runtime_id for r in t.runtime_results)]
        if found:
            return found[0]
        await asyncio.sleep(0.1)
    raise AssertionError(f"no background turn ran {runtime_id}")


async def test_a_background_event_follower_is_a_job_with_its_events(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel, services.channel_as("store", "scheduler") as store_channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(minimal_session(requested_plugins=["event-probe"], approved_plugins=["event-probe"]))).session
        events = [e async for e in stub.SubmitActions(scheduler_pb2.SubmitActionsRequest(
            session_id=session.id, actions=[resources_pb2.PlayerAction(text="I ring the bell.")]))]
        turn = events[-1].turn_completed
        results = {r.runtime_id: r for r in turn.runtime_results}
        assert results["event-probe/aside"].status == resources_pb2.RUNTIME_STATUS_SKIPPED
        assert results["event-probe/aside"].reason == BACKGROUND_QUEUED
        assert "event-probe/aside" not in [e.runtime_started.runtime_id for e in events if e.WhichOneof("event") == "runtime_started"]
        assert from_struct(results["event-probe/follower"].output) == {"from": "event-probe/source"}, "the others run in the turn"
        jobs = (await store_pb2_grpc.TransactionalStoreStub(store_channel).ListDetachedJobs(
            store_pb2.ListDetachedJobsRequest(session_id=session.id))).jobs
        assert ("event-probe/aside", turn.id) in [(job.runtime_id, job.turn_id) for job in jobs]
        ran = await _background_turn(stub, session.id, "event-probe/aside")
    [result] = ran.runtime_results
    assert result.status == resources_pb2.RUNTIME_STATUS_SUCCESS, result.reason
    assert from_struct(result.output) == {"heard": 1, "origin": "background"}


async def test_a_manual_runtime_marked_background_answers_at_once(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(minimal_session(requested_plugins=["graph-probe"], approved_plugins=["graph-probe"]))).session
        request = scheduler_pb2.RunManualRequest(session_id=session.id, runtime_id="graph-probe/always-background")
        events = [e async for e in stub.RunManual(request)]
        assert [e.WhichOneof("event") for e in events] == ["turn_started"], "the caller gets the job's turn id at once"
        job = events[0].turn_started.turn_id
        for _ in range(600):
            try:
                recorded = (await stub.GetTurn(scheduler_pb2.GetTurnRequest(session_id=session.id, turn_id=job))).turn
                if recorded.status == resources_pb2.TURN_STATUS_COMMITTED:
                    break
            except grpc.aio.AioRpcError as error:
                assert error.code() == grpc.StatusCode.NOT_FOUND
            await asyncio.sleep(0.1)
    assert recorded.origin == resources_pb2.TURN_ORIGIN_BACKGROUND and recorded.status == resources_pb2.TURN_STATUS_COMMITTED
    assert from_struct(recorded.runtime_results[0].output) == {"got": {}, "origin": "background"}

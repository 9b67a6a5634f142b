"""Detached post-turn runtimes: queued at commit, run by the schedulers' workers after the turn returns."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from services.scheduler.detached.worker import DetachedWorker
from services.scheduler.hooks.bus import HookBus
from services.scheduler.peers import Peers
from services.scheduler.plugin_cache import PluginCache
from services.scheduler.settings import SchedulerSettings
from services.scheduler.turn.runner import TurnRunner
from shared.errors import error_info
from shared.grpc_client import open_channel
from shared.structs import from_struct, from_value
from tests.e2e.conftest import minimal_session

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def submit(stub, session_id: str, text: str) -> store_pb2.Turn:
    request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[resources_pb2.PlayerAction(text=text)])
    return [event async for event in stub.SubmitActions(request)][-1].turn_completed


async def session_with_a_running_job(stub, store, attempts: int):
    """A session of detached-slow-probe after one turn, once its job (8 s of work) runs (on its snapshot, without the
    session's lease: it takes the lease only to commit)."""
    session = (await stub.CreateSession(minimal_session(requested_plugins=["detached-slow-probe"], approved_plugins=["detached-slow-probe"]))).session
    await submit(stub, session.id, "I wait by the fire.")
    for _ in range(attempts):
        jobs = (await store.ListDetachedJobs(store_pb2.ListDetachedJobsRequest(session_id=session.id))).jobs
        if jobs and jobs[0].status == "running":
            break
        await asyncio.sleep(0.05)
    assert jobs[0].status == "running"
    return session


async def count(store, session_id: str):
    entries = (await store.ListPluginData(store_pb2.ListPluginDataRequest(
        session_id=session_id, plugin_id="detached-probe", namespace="runs"))).entries
    return from_value(entries[0].value) if entries else None


async def finished_jobs(store, session_ids: list[str], timeout_s: float = 20.0) -> dict[str, list[store_pb2.DetachedJob]]:
    for _ in range(int(timeout_s / 0.1)):
        jobs = {sid: list((await store.ListDetachedJobs(store_pb2.ListDetachedJobsRequest(session_id=sid))).jobs) for sid in session_ids}
        if all(jobs[sid] and all(job.status not in ("queued", "running") for job in jobs[sid]) for sid in session_ids):
            return jobs
        await asyncio.sleep(0.1)
    raise AssertionError(f"jobs did not finish: {jobs}")


async def test_a_detached_runtime_commits_after_its_turn_returned(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel, services.channel_as("store", "scheduler") as store_channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        store = store_pb2_grpc.TransactionalStoreStub(store_channel)
        session = (await stub.CreateSession(minimal_session(requested_plugins=["detached-probe"], approved_plugins=["detached-probe"]))).session
        turn = await submit(stub, session.id, "I light the lamp.")
        queued = next(r for r in turn.runtime_results if r.runtime_id == "detached-probe/later")
        assert turn.status == store_pb2.TURN_STATUS_COMMITTED and queued.status == resources_pb2.RUNTIME_STATUS_SKIPPED and queued.reason.startswith("detached")
        assert await count(store, session.id) is None, "the turn returned before its detached runtime ran"

        [job] = (await finished_jobs(store, [session.id]))[session.id]
        assert (job.status, job.turn_id, job.attempts) == ("succeeded", turn.id, 1), job.error
        assert await count(store, session.id) == 1
        turns = (await stub.ListTurns(scheduler_pb2.ListTurnsRequest(session_id=session.id))).turns
        background = next(t for t in turns if t.origin == resources_pb2.TURN_ORIGIN_BACKGROUND)
        assert from_struct(job.result) == {"turnId": background.id, "turnStatus": "committed", "runtimeStatus": "success"}
        [result] = background.runtime_results
        assert from_struct(result.output) == {
            "origin": "background", "player": "I light the lamp.", "sourceTurn": turn.id, "hasStory": True,
        }, "the job reads the source turn's snapshot"
        assert not background.player_message and background.logical_turn == turn.logical_turn, "a job is not a player turn"

        # The player goes on; a new job is queued by the next turn.
        second = await submit(stub, session.id, "I read by its light.")
        assert second.status == store_pb2.TURN_STATUS_COMMITTED and second.logical_turn == 2
        jobs = (await finished_jobs(store, [session.id]))[session.id]
        assert [j.status for j in jobs] == ["succeeded", "succeeded"] and await count(store, session.id) == 2


async def test_competing_workers_never_run_one_job_twice(services) -> None:
    settings = SchedulerSettings(**{f"{name}_addr": addr for name, addr in services.addrs.items()},
                                 scheduler_detached_workers=2, scheduler_detached_poll_ms=20)
    replicas = []
    for index in range(2):
        peers = Peers.connect(settings)
        hooks = HookBus(peers.hooks)
        runner = TurnRunner(peers, PluginCache(peers.registry), hooks, settings)
        replicas.append((peers, DetachedWorker(peers.store, runner, settings, holder=f"replica-{index}")))
    try:
        async with open_channel(services.addrs["scheduler"]) as channel, services.channel_as("store", "scheduler") as store_channel:
            stub = scheduler_pb2_grpc.SchedulerStub(channel)
            store = store_pb2_grpc.TransactionalStoreStub(store_channel)
            for _, worker in replicas:
                worker.start()
            sessions = [(await stub.CreateSession(minimal_session(requested_plugins=["detached-probe"], approved_plugins=["detached-probe"]))).session.id
                        for _ in range(6)]
            await asyncio.gather(*(submit(stub, sid, "I wait.") for sid in sessions))
            jobs = await finished_jobs(store, sessions)
            for sid in sessions:
                [job] = jobs[sid]
                assert (job.status, job.attempts) == ("succeeded", 1), job.error
                assert await count(store, sid) == 1, "the job's runtime ran exactly once"
                turns = (await stub.ListTurns(scheduler_pb2.ListTurnsRequest(session_id=sid))).turns
                assert sum(t.origin == resources_pb2.TURN_ORIGIN_BACKGROUND for t in turns) == 1
            ran_here = [job_id for _, worker in replicas for job_id in worker.finished]
            assert len(ran_here) == len(set(ran_here)), "no job was finished by two workers"
    finally:
        for peers, worker in replicas:
            await worker.stop()
            await peers.close()


async def test_ending_a_session_cancels_the_detached_job_that_holds_its_lease(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel, services.channel_as("store", "scheduler") as store_channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        store = store_pb2_grpc.TransactionalStoreStub(store_channel)
        session = await session_with_a_running_job(stub, store, attempts=100)
        ended = await stub.EndSession(scheduler_pb2.EndSessionRequest(session_id=session.id))
        assert ended.session.status == store_pb2.SESSION_STATUS_ENDED
        [job] = (await store.ListDetachedJobs(store_pb2.ListDetachedJobsRequest(session_id=session.id))).jobs
        assert (job.status, job.error) == ("cancelled", "the session ended")
        await asyncio.sleep(1.0)
        entries = (await store.ListPluginData(store_pb2.ListPluginDataRequest(
            session_id=session.id, plugin_id="detached-slow-probe", namespace="runs"))).entries
        assert not entries, "the cancelled job committed nothing"
        turns = (await stub.ListTurns(scheduler_pb2.ListTurnsRequest(session_id=session.id))).turns
        assert [t.origin for t in turns] == [resources_pb2.TURN_ORIGIN_PLAYER]


async def test_a_job_whose_guard_skips_its_runtime_succeeds(services) -> None:
    """Nothing to do this time is a job done: an operator's list of failed jobs holds real failures only."""
    async with open_channel(services.addrs["scheduler"]) as channel, services.channel_as("store", "scheduler") as store_channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        store = store_pb2_grpc.TransactionalStoreStub(store_channel)
        probe = "detached-guard-probe"
        session = (await stub.CreateSession(minimal_session(requested_plugins=[probe], approved_plugins=[probe]))).session
        await submit(stub, session.id, "I wait.")
        [job] = (await finished_jobs(store, [session.id]))[session.id]
        assert job.status == "succeeded" and from_struct(job.result)["runtimeStatus"] == "skipped", job.error


async def test_an_interjection_never_joins_a_background_turn(services) -> None:
    """A detached job's turn runs right after the player's turn (no player's turn running): an Interject then is refused
    (FAILED_PRECONDITION with ErrorInfo, saying why and what to do), and the job's turn never hears the words."""
    async with open_channel(services.addrs["scheduler"]) as channel, services.channel_as("store", "scheduler") as store_channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        store = store_pb2_grpc.TransactionalStoreStub(store_channel)
        session = await session_with_a_running_job(stub, store, attempts=400)
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await stub.Interject(scheduler_pb2.InterjectRequest(session_id=session.id, text="Wait, I hear footsteps!"))
        assert raised.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        details = raised.value.details()
        assert "no player's turn" in details and "background work" in details and "submit it as the next action instead" in details
        assert error_info(raised.value).reason == "NO_RUNNING_TURN"
        ended = await stub.EndSession(scheduler_pb2.EndSessionRequest(session_id=session.id))
        assert ended.session.status == store_pb2.SESSION_STATUS_ENDED

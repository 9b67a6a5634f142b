"""A detached job runs without the session's turn lease (issue 39): a player's turn submitted while a job runs starts
and finishes without waiting for it; a job whose read a player's commit changed meanwhile runs again and commits on
the new state; a job already committed answers with its turn. Through the five real services."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from services.scheduler.execution.origins import TurnOrigin
from services.scheduler.hooks.bus import HookBus
from services.scheduler.peers import Peers
from services.scheduler.plugin_cache import PluginCache
from services.scheduler.settings import SchedulerSettings
from services.scheduler.turn.request import DetachedRun, TurnRequest
from services.scheduler.turn.runner import TurnRunner
from shared.grpc_client import open_channel
from shared.ids import detached_job_key
from shared.structs import from_struct, from_value
from tests.e2e.conftest import minimal_session
from tests.e2e.test_detached import finished_jobs, submit

pytestmark = pytest.mark.asyncio(loop_scope="session")
PROBE = "detached-gate-probe"


async def _seen(store, session_id: str) -> dict[str, int]:
    entries = (await store.ListPluginData(store_pb2.ListPluginDataRequest(session_id=session_id, plugin_id=PROBE, namespace="seen"))).entries
    return {entry.key: from_value(entry.value) for entry in entries}


async def _until(path: Path, attempts: int = 600) -> None:
    for _ in range(attempts):
        if path.exists():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{path.name} never appeared")


async def test_a_player_plays_while_a_job_runs_and_the_job_runs_again_on_what_the_player_changed(services) -> None:
    data = Path(services.data_dir)
    token = uuid.uuid4().hex
    async with open_channel(services.addrs["scheduler"]) as channel, services.channel_as("store", "scheduler") as store_channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        store = store_pb2_grpc.TransactionalStoreStub(store_channel)
        session = (await stub.CreateSession(minimal_session(requested_plugins=[PROBE], approved_plugins=[PROBE]))).session
        first = await submit(stub, session.id, f"wait:{token} I light the lamp.")
        assert first.status == store_pb2.TURN_STATUS_COMMITTED
        await _until(data / f"gate-probe.{token}.waiting")  # the job runs, held at its gate

        # The player acts while the job runs: the turn takes the lease, runs and commits without waiting for the job.
        second = await submit(stub, session.id, "I read by its light.")
        assert second.status == store_pb2.TURN_STATUS_COMMITTED and second.logical_turn == 2
        jobs = (await store.ListDetachedJobs(store_pb2.ListDetachedJobsRequest(session_id=session.id))).jobs
        assert [(job.turn_id, job.status) for job in jobs] == [(first.id, "running"), (second.id, "queued")], \
            "the first job was still held at its gate when the player's turn finished"

        (data / f"gate-probe.{token}.open").touch()
        done = (await finished_jobs(store, [session.id], timeout_s=60))[session.id]
        assert [(job.status, job.attempts) for job in done] == [("succeeded", 1), ("succeeded", 1)], [job.error for job in done]
        # It read tally 1, the player's second turn made it 2 before its commit: the commit refused, it ran again on 2.
        assert (data / f"gate-probe.{first.id}.runs").read_text().split() == ["1", "2"]
        assert await _seen(store, session.id) == {first.id: 2, second.id: 2}
        turns = (await stub.ListTurns(scheduler_pb2.ListTurnsRequest(session_id=session.id))).turns
        background = [t for t in turns if t.origin == resources_pb2.TURN_ORIGIN_BACKGROUND]
        assert len(background) == 2, "one turn per job: the refused commit wrote nothing"
        job_turn = next(t for t in background if t.id == from_struct(done[0].result)["turnId"])
        assert job_turn.logical_turn == 2, "the job's logical turn is its commit's"
        assert [from_struct(r.output) for r in job_turn.runtime_results] == [{"seen": 2}]

        # Run again after its commit (a worker that died before completing it): it answers with its turn, runs nothing.
        again = await _run_job_again(services, done[0])
        assert again.id == job_turn.id
        assert (data / f"gate-probe.{first.id}.runs").read_text().split() == ["1", "2"]


async def _run_job_again(services, job: store_pb2.DetachedJob) -> store_pb2.Turn:
    # As the group's scheduler calls its peers (its certificate).
    settings = SchedulerSettings(**{f"{name}_addr": addr for name, addr in services.addrs.items()},
                                 **services.security_as("scheduler").model_dump(), scheduler_detached_workers=0)
    peers = Peers.connect(settings)
    try:
        runner = TurnRunner(peers, PluginCache(peers.registry), HookBus(peers.hooks), settings)
        request = TurnRequest(job.session_id, detached_job_key(job.id), DetachedRun(job), origin=TurnOrigin.BACKGROUND, off_lease=True)

        async def ignore(_) -> None:
            pass

        return await runner.run(request, ignore)
    finally:
        await peers.close()

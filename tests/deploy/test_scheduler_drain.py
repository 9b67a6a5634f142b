"""The scheduler's SIGTERM drain is one budget (COVEL_SCHEDULER_DRAIN_S): a detached job running
when the signal comes finishes within it, or goes back to the queue for another replica; the
process exits within the budget either way."""

from __future__ import annotations

import asyncio
import os
import signal
import time

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from covel_cli.launcher import ServiceGroup, free_port_addrs
from shared.grpc_client import open_channel
from shared.settings import REPO_ROOT
from shared.structs import from_value
from tests.support.builtin_plugins import non_story_core_plugin_ids

PLUGINS = REPO_ROOT / "tests" / "deploy" / "plugins"


def _group(tmp_path, drain_s: float) -> ServiceGroup:
    env = {
        "COVEL_PLUGIN_DIRS": os.pathsep.join([str(REPO_ROOT / "plugins"), str(PLUGINS)]),
        "COVEL_SCHEDULER_DRAIN_S": str(drain_s),
        "COVEL_SCHEDULER_DETACHED_POLL_MS": "50",
    }
    return ServiceGroup(free_port_addrs(), tmp_path, extra_env=env)


async def _job_running(group: ServiceGroup, seconds: float) -> tuple[str, store_pb2.DetachedJob]:
    """A session whose turn queued a slow-detached job that takes `seconds`; returns once a worker runs it."""
    async with open_channel(group.addrs["scheduler"]) as channel, group.channel_as("store", "scheduler") as store_channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        store = store_pb2_grpc.TransactionalStoreStub(store_channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(
            requested_plugins=["slow-detached"], approved_plugins=["slow-detached"], excluded_plugins=non_story_core_plugin_ids()), timeout=20)).session
        request = scheduler_pb2.SubmitActionsRequest(session_id=session.id, actions=[resources_pb2.PlayerAction(text=f"wait {seconds}")])
        [*_, last] = [event async for event in stub.SubmitActions(request, timeout=30)]
        assert last.turn_completed.status == store_pb2.TURN_STATUS_COMMITTED
        for _ in range(200):
            jobs = (await store.ListDetachedJobs(store_pb2.ListDetachedJobsRequest(session_id=session.id))).jobs
            if jobs and jobs[0].status == "running":
                return session.id, jobs[0]
            await asyncio.sleep(0.05)
        raise AssertionError(f"the job never ran: {jobs}")


async def _jobs(group: ServiceGroup, session_id: str) -> list[store_pb2.DetachedJob]:
    async with group.channel_as("store", "scheduler") as channel:
        store = store_pb2_grpc.TransactionalStoreStub(channel)
        return list((await store.ListDetachedJobs(store_pb2.ListDetachedJobsRequest(session_id=session_id))).jobs)


async def _runs(group: ServiceGroup, session_id: str):
    async with group.channel_as("store", "scheduler") as channel:
        store = store_pb2_grpc.TransactionalStoreStub(channel)
        entries = (await store.ListPluginData(store_pb2.ListPluginDataRequest(
            session_id=session_id, plugin_id="slow-detached", namespace="runs"))).entries
        return from_value(entries[0].value) if entries else None


async def test_sigterm_lets_a_running_detached_job_finish(tmp_path):
    group = _group(tmp_path, drain_s=20)
    try:
        await group.start()
        session_id, _ = await _job_running(group, 1.5)
        scheduler = group.processes["scheduler"]
        os.kill(scheduler.pid, signal.SIGTERM)
        assert await asyncio.wait_for(scheduler.wait(), 30) == 0
        [job] = await _jobs(group, session_id)
        assert (job.status, job.attempts) == ("succeeded", 1), job
        assert await _runs(group, session_id) == 1
        assert "detached.finished" in group.log_tail("scheduler", 200)
    finally:
        await group.stop()


async def test_sigterm_releases_a_detached_job_that_outlasts_the_drain(tmp_path):
    drain_s = 2.0
    group = _group(tmp_path, drain_s=drain_s)
    try:
        await group.start()
        session_id, running = await _job_running(group, 60)
        scheduler = group.processes["scheduler"]
        signalled = time.monotonic()
        os.kill(scheduler.pid, signal.SIGTERM)
        assert await asyncio.wait_for(scheduler.wait(), 30) == 0
        # One budget: the process is gone within it (plus the interpreter's exit), not after each step's.
        assert time.monotonic() - signalled < drain_s + 2.5
        [job] = await _jobs(group, session_id)
        assert (job.status, job.holder, job.lease_id, job.attempts) == ("queued", "", "", 1), job
        assert await _runs(group, session_id) is None, "the job was cut short, not run"
        assert "detached.released" in group.log_tail("scheduler", 200)
        # Back in the queue: the next worker to ask gets it.
        async with group.channel_as("store", "scheduler") as channel:
            store = store_pb2_grpc.TransactionalStoreStub(channel)
            claimed = (await store.ClaimDetachedJob(store_pb2.ClaimDetachedJobRequest(holder="another-replica"))).job
        assert (claimed.id, claimed.status, claimed.attempts) == (running.id, "running", 2)
        assert claimed.lease_id != running.lease_id
    finally:
        await group.stop()

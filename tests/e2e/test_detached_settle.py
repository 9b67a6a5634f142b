"""schedule.detached.settle through the five services: a player's next action waits for the job its last turn
queued (the job runs first, the next turn reads what it committed), and waits at most maxSettleWaitMs. The
scheduler under test runs no workers of its own: each test starts the one that runs the job, when it wants it."""

from __future__ import annotations

import asyncio
import time

import pytest
import pytest_asyncio

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from services.scheduler.detached.worker import DetachedWorker
from services.scheduler.hooks.bus import HookBus
from services.scheduler.peers import Peers
from services.scheduler.plugin_cache import PluginCache
from services.scheduler.settings import SchedulerSettings
from services.scheduler.turn.runner import TurnRunner
from shared.grpc_client import open_channel
from shared.structs import from_struct
from tests.e2e.conftest import minimal_session, running_services

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def group(tmp_path_factory):
    async with running_services(tmp_path_factory.mktemp("covel-settle"), extra_env={"COVEL_SCHEDULER_DETACHED_WORKERS": "0"}) as services:
        yield services


async def submit(stub, session_id: str, text: str) -> resources_pb2.Turn:
    request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[resources_pb2.PlayerAction(text=text)])
    return [event async for event in stub.SubmitActions(request)][-1].turn_completed


def seen_count(turn: resources_pb2.Turn, plugin_id: str) -> int:
    look = next(r for r in turn.runtime_results if r.runtime_id == f"{plugin_id}/look")
    return from_struct(look.output)["count"]


async def jobs_of(store, session_id: str) -> list[store_pb2.DetachedJob]:
    return list((await store.ListDetachedJobs(store_pb2.ListDetachedJobsRequest(session_id=session_id))).jobs)


async def opened(stub, plugin_id: str) -> str:
    return (await stub.CreateSession(minimal_session(requested_plugins=[plugin_id], approved_plugins=[plugin_id]))).session.id


async def test_the_next_action_waits_for_a_settling_job(group) -> None:
    # The worker calls the store as the scheduler does, with the scheduler's certificate of the group's PKI.
    identity = group.security_as("scheduler")
    settings = SchedulerSettings(**{f"{name}_addr": addr for name, addr in group.addrs.items()},
                                 tls_cert_file=identity.tls_cert_file, tls_key_file=identity.tls_key_file, tls_ca_file=identity.tls_ca_file,
                                 scheduler_detached_workers=1, scheduler_detached_poll_ms=50)
    peers = Peers.connect(settings)
    worker = DetachedWorker(peers.store, TurnRunner(peers, PluginCache(peers.registry), HookBus(peers.hooks), settings), settings,
                            holder="settle-test")
    try:
        async with open_channel(group.addrs["scheduler"]) as channel, group.channel_as("store", "scheduler") as store_channel:
            stub, store = scheduler_pb2_grpc.SchedulerStub(channel), store_pb2_grpc.TransactionalStoreStub(store_channel)
            session_id = await opened(stub, "settle-probe")
            first = await submit(stub, session_id, "I bank the fire.")
            assert seen_count(first, "settle-probe") == 0
            [job] = await jobs_of(store, session_id)
            assert (job.status, job.settle) == ("queued", True)
            # The next action is sent while the job is still queued (no worker runs yet); the worker starts after it.
            second = asyncio.create_task(submit(stub, session_id, "I sleep by it."))
            await asyncio.sleep(0.5)
            assert not second.done(), "the action waits for the settling job"
            worker.start()
            turn = await asyncio.wait_for(second, 60)
            assert seen_count(turn, "settle-probe") == 1, "the job ran and committed before the next turn started"
            ran = (await jobs_of(store, session_id))[0]
            assert (ran.id, ran.status) == (job.id, "succeeded"), ran.error
    finally:
        await worker.stop()
        await peers.close()


async def test_the_wait_ends_at_max_settle_wait_ms(group) -> None:
    async with open_channel(group.addrs["scheduler"]) as channel, group.channel_as("store", "scheduler") as store_channel:
        stub, store = scheduler_pb2_grpc.SchedulerStub(channel), store_pb2_grpc.TransactionalStoreStub(store_channel)
        session_id = await opened(stub, "settle-bound-probe")
        await submit(stub, session_id, "I bank the fire.")
        started = time.monotonic()
        turn = await submit(stub, session_id, "I do not wait for it.")
        waited = time.monotonic() - started
        # maxSettleWaitMs is 1000: the turn waited that long (a lower bound holds on a loaded machine), then ran.
        assert waited >= 1.0 and turn.status == resources_pb2.TURN_STATUS_COMMITTED
        assert seen_count(turn, "settle-bound-probe") == 0, "no worker ran the job: the turn went on without it"
        assert [job.status for job in await jobs_of(store, session_id)] == ["queued", "queued"]
        # A job that settles nothing (settle: false) makes no action wait: detached-probe's jobs stay queued meanwhile.
        other = await opened(stub, "detached-probe")
        await submit(stub, other, "I light the lamp.")
        # Were it waited for, the turn would wait the default maxSettleWaitMs (two minutes).
        await asyncio.wait_for(submit(stub, other, "I read by it."), 30)
        assert [job.settle for job in await jobs_of(store, other)] == [False, False]

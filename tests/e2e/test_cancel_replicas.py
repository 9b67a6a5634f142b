"""Cancel and Interject sent to a scheduler replica that is not running the turn reach the one that
is, through the store's turn signals (SignalTurn / TakeTurnSignals)."""

from __future__ import annotations

import asyncio
import socket
import sys
import time

import grpc
import pytest
import pytest_asyncio

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2
from shared.grpc_client import check_health, open_channel
from shared.settings import REPO_ROOT
from shared.structs import to_struct
from tests.e2e.conftest import running_services

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def two_schedulers(tmp_path_factory):
    """The five services, and a second scheduler replica on the same store, registry, hooks and gateway."""
    async with running_services(tmp_path_factory.mktemp("replicas")) as group:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            second_addr = f"127.0.0.1:{probe.getsockname()[1]}"
        env = {**group.env("scheduler"), "COVEL_SCHEDULER_ADDR": second_addr, "COVEL_SCHEDULER_INSTANCE_ID": "replica-b",
               "COVEL_SCHEDULER_DETACHED_WORKERS": "0"}
        with (group.log_dir / "scheduler-b.log").open("ab") as log:
            second = await asyncio.create_subprocess_exec(sys.executable, "-m", "services.scheduler", env=env, cwd=REPO_ROOT,
                                                          stdout=log, stderr=log, stdin=asyncio.subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while await check_health(second_addr, timeout_s=1.0, security=group.security("scheduler")) != "SERVING":
                assert second.returncode is None, (group.log_dir / "scheduler-b.log").read_text()[-3000:]
                assert time.monotonic() < deadline, "the second scheduler did not start serving"
                await asyncio.sleep(0.1)
            yield group, second_addr
        finally:
            second.terminate()
            await asyncio.wait_for(second.wait(), 30)


async def test_cancel_and_interject_on_another_replica_reach_the_turn(two_schedulers, tmp_path) -> None:
    group, other = two_schedulers
    marker = tmp_path / "stopped.txt"
    async with open_channel(group.addrs["scheduler"]) as running_channel, open_channel(other) as other_channel:
        running_here = scheduler_pb2_grpc.SchedulerStub(running_channel)
        elsewhere = scheduler_pb2_grpc.SchedulerStub(other_channel)
        session = (await elsewhere.CreateSession(scheduler_pb2.CreateSessionRequest(
            requested_plugins=["slow-probe"], approved_plugins=["slow-probe"], plugin_settings={"slow-probe": to_struct({"marker": str(marker)})}))).session
        events: list[scheduler_pb2.TurnEvent] = []

        async def read() -> None:
            async for event in running_here.SubmitActions(scheduler_pb2.SubmitActionsRequest(
                    session_id=session.id, actions=[resources_pb2.PlayerAction(text="I wait.")])):
                events.append(event)

        reader = asyncio.create_task(read())
        for _ in range(200):
            if any(e.WhichOneof("event") == "runtime_started" for e in events):
                break
            await asyncio.sleep(0.05)
        # The handler runs (in its sandbox worker) before it is cancelled, so it sees the signal.
        for _ in range(200):
            if marker.exists() and marker.read_text() == "started":
                break
            await asyncio.sleep(0.05)
        turn_id = next(e.turn_started.turn_id for e in events if e.WhichOneof("event") == "turn_started")

        heard = await elsewhere.Interject(scheduler_pb2.InterjectRequest(session_id=session.id, text="Hurry up."))
        assert heard.turn_id == turn_id, "the interjection was left for the running turn"
        started = time.monotonic()
        await elsewhere.Cancel(scheduler_pb2.CancelRequest(session_id=session.id, reason="stopped from another replica"))
        await asyncio.wait_for(reader, 10)
        assert time.monotonic() - started < 3, "the lease holder took the signal within its poll interval"
        turn = events[-1].turn_completed
        assert turn.id == turn_id and turn.status == store_pb2.TURN_STATUS_FAILED
        assert turn.abort_reason == "cancelled: stopped from another replica"
        # The handler hears the signal in its sandbox worker and writes so there, maybe after the turn has ended.
        for _ in range(200):
            # "" while the handler's write is half done (the file truncated, not yet written).
            if marker.read_text() not in ("started", ""):
                break
            await asyncio.sleep(0.05)
        assert marker.read_text() == "signal=True:cancelled", "the handler saw the cancellation signal"

        for stub in (elsewhere, running_here):
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await stub.Cancel(scheduler_pb2.CancelRequest(session_id=session.id))
            assert raised.value.code() == grpc.StatusCode.FAILED_PRECONDITION, "no turn runs on any replica"
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await elsewhere.Interject(scheduler_pb2.InterjectRequest(session_id=session.id, text="Anyone?"))
        assert raised.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "submit it as the next action instead" in raised.value.details()

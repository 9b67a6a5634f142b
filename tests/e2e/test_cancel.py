"""Cancel stops a running turn: its handlers see the signal, nothing commits, the turn is recorded."""

from __future__ import annotations

import asyncio
import time

import grpc
import pytest

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2
from shared.grpc_client import open_channel
from shared.structs import to_struct

# Only sessions of its own: the session's default group will do (tests/e2e/conftest.py).
SHARED_SERVICES = True

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_cancel_a_running_turn(services, tmp_path) -> None:
    marker = tmp_path / "stopped.txt"
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (
            await stub.CreateSession(
                scheduler_pb2.CreateSessionRequest(
                    requested_plugins=["slow-probe"], approved_plugins=["slow-probe"], plugin_settings={"slow-probe": to_struct({"marker": str(marker)})}
                )
            )
        ).session
        request = scheduler_pb2.SubmitActionsRequest(session_id=session.id, actions=[resources_pb2.PlayerAction(text="I wait.")])
        events = []

        async def read() -> None:
            async for event in stub.SubmitActions(request):
                events.append(event)

        reader = asyncio.create_task(read())
        for _ in range(100):
            if any(e.WhichOneof("event") == "runtime_started" for e in events):
                break
            await asyncio.sleep(0.05)
        # The handler runs (in its sandbox worker) before it is cancelled, so it sees the signal.
        for _ in range(200):
            if marker.exists() and marker.read_text() == "started":
                break
            await asyncio.sleep(0.05)
        started = time.monotonic()
        await stub.Cancel(scheduler_pb2.CancelRequest(session_id=session.id, reason="the player stopped it"))
        await asyncio.wait_for(reader, 10)
        assert time.monotonic() - started < 3
        turn = events[-1].turn_completed
        assert turn.status == store_pb2.TURN_STATUS_FAILED and turn.abort_reason == "cancelled: the player stopped it"
        # The handler's worker gets the stop as the turn ends (shared/sandbox/host.py): on a loaded machine
        # its write may come a moment after the turn's end.
        for _ in range(200):
            if marker.read_text() != "started":
                break
            await asyncio.sleep(0.05)
        assert marker.read_text() == "signal=True:cancelled"
        messages = (await stub.ListMessages(scheduler_pb2.ListMessagesRequest(session_id=session.id))).messages
        assert list(messages) == []
        recorded = (await stub.GetTurn(scheduler_pb2.GetTurnRequest(session_id=session.id, turn_id=turn.id))).turn
        assert recorded.status == store_pb2.TURN_STATUS_FAILED

        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await stub.Cancel(scheduler_pb2.CancelRequest(session_id=session.id))
        assert raised.value.code() == grpc.StatusCode.FAILED_PRECONDITION

"""Auto-advance: a story yielding `continue` asks for the next turn; the player can stop the chain."""

from __future__ import annotations

import asyncio

import grpc
import pytest
import pytest_asyncio

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2
from shared.grpc_client import open_channel
from shared.structs import to_struct
from tests.e2e.conftest import minimal_session, running_services

pytestmark = pytest.mark.asyncio(loop_scope="session")
CONTINUING = {"segments": [{"kind": "narration", "text": "The road unrolls ahead."}], "yield": "continue"}
# The player's turn, and each continuation (its prompt says the player waits).
SCRIPT = {"rules": [{"match": match, "slots": ["story"], "reply": {"json": CONTINUING}} for match in ("walk on", "The player waits")]}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def advancing(tmp_path_factory):
    async with running_services(tmp_path_factory.mktemp("advance"), script=SCRIPT) as group:
        yield group


async def _chain(stub, session_id: str, stop_after_turns: int) -> tuple[list[store_pb2.Turn], scheduler_pb2.CancelResponse]:
    """Submit; once `stop_after_turns` turns completed, Cancel (the player stops advancing)."""
    turns: list[store_pb2.Turn] = []
    cancelled = None
    async for event in stub.SubmitActions(scheduler_pb2.SubmitActionsRequest(
            session_id=session_id, actions=[resources_pb2.PlayerAction(text="I walk on.")])):
        if event.WhichOneof("event") == "turn_completed":
            turns.append(event.turn_completed)
            if len(turns) == stop_after_turns and cancelled is None:
                cancelled = await stub.Cancel(scheduler_pb2.CancelRequest(session_id=session_id, reason="the player stops"))
    return turns, cancelled


async def test_the_player_stops_the_chain_with_cancel(advancing) -> None:
    async with open_channel(advancing.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(minimal_session(
            requested_plugins=["pace-probe"], approved_plugins=["pace-probe"], plugin_settings={"framework": to_struct({"maxAutoAdvance": 20})}))).session
        turns, cancelled = await _chain(stub, session.id, stop_after_turns=2)
        assert cancelled is not None, "Cancel between or during continuation turns is not refused"
        # The chain stopped: either before the next continuation started, or by cancelling it.
        assert [t.origin for t in turns[:2]] == [resources_pb2.TURN_ORIGIN_PLAYER, resources_pb2.TURN_ORIGIN_CONTINUATION]
        assert len(turns) <= 3 and all(t.status == store_pb2.TURN_STATUS_COMMITTED for t in turns[:2])
        if len(turns) == 3:
            assert turns[2].status == store_pb2.TURN_STATUS_FAILED and turns[2].abort_reason == "cancelled: the player stops"
        await asyncio.sleep(0.6)  # a chain that had not stopped would have started its next turn by now
        listed = (await stub.ListTurns(scheduler_pb2.ListTurnsRequest(session_id=session.id))).turns
        assert len(listed) == len(turns), "no turn ran after the player stopped advancing"
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await stub.Cancel(scheduler_pb2.CancelRequest(session_id=session.id))
        assert raised.value.code() == grpc.StatusCode.FAILED_PRECONDITION, "nothing left to stop"


async def test_without_cancel_the_chain_runs_to_the_bound(advancing) -> None:
    async with open_channel(advancing.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(minimal_session(
            requested_plugins=["pace-probe"], approved_plugins=["pace-probe"], plugin_settings={"framework": to_struct({"maxAutoAdvance": 2}),
                                                               "pace-probe": to_struct({"delayMs": 10})}))).session
        turns, _ = await _chain(stub, session.id, stop_after_turns=99)
    assert [t.origin for t in turns] == [resources_pb2.TURN_ORIGIN_PLAYER, resources_pb2.TURN_ORIGIN_CONTINUATION, resources_pb2.TURN_ORIGIN_CONTINUATION]


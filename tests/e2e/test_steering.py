"""Steering: what the player says while a turn runs reaches the story agent's next step."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2
from shared.grpc_client import open_channel
from tests.e2e.conftest import running_services

pytestmark = pytest.mark.asyncio(loop_scope="session")
# The first draft is slow, so the interjection arrives while it is written; once the text is
# written the interjection is merged (steering after the text) and the rule answers it.
SCRIPT = {
    "queues": {"story": [{"json": {"segments": [{"kind": "narration", "text": "The guard ignores you."}]}, "delay_ms": 1500}]},
    "rules": [{"match": "the player interjects", "slots": ["story"],
               "reply": {"json": {"segments": [{"kind": "narration", "text": "You shout, and the guard turns round."}]}}}],
}


async def test_an_interjection_is_merged_before_the_next_step(tmp_path) -> None:
    async with running_services(tmp_path, script=SCRIPT) as services:
        async with open_channel(services.addrs["scheduler"]) as channel:
            stub = scheduler_pb2_grpc.SchedulerStub(channel)
            session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest())).session
            with pytest.raises(grpc.aio.AioRpcError) as idle:
                await stub.Interject(scheduler_pb2.InterjectRequest(session_id=session.id, text="Hello?"))
            assert idle.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            with pytest.raises(grpc.aio.AioRpcError) as empty:
                await stub.Interject(scheduler_pb2.InterjectRequest(session_id=session.id, text="  "))
            assert empty.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "text" in empty.value.details()

            stream = stub.SubmitActions(scheduler_pb2.SubmitActionsRequest(
                session_id=session.id, actions=[resources_pb2.PlayerAction(text="I wait by the gate.")]))
            events = []
            async for event in stream:
                events.append(event)
                if event.WhichOneof("event") == "runtime_started" and event.runtime_started.stage == resources_pb2.RUNTIME_STAGE_NARRATIVE:
                    await asyncio.sleep(0.3)
                    reply = await stub.Interject(scheduler_pb2.InterjectRequest(session_id=session.id, text="Hey, over here!"))
                    assert reply.turn_id
        turn = events[-1].turn_completed
        assert turn.status == store_pb2.TURN_STATUS_COMMITTED, turn
        assert "the guard turns round" in turn.narrative and "ignores you" not in turn.narrative
        # The draft streamed before the interjection was withdrawn before the answer to it streamed.
        deltas = [e.narrative_delta for e in events if e.WhichOneof("event") == "narrative_delta"]
        assert any(delta.reset for delta in deltas)

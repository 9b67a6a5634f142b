"""Text with a NUL character on the client API is refused at the door (PostgreSQL cannot store it),
naming the field, and nothing is written: through the five real services."""

from __future__ import annotations

import grpc
import pytest

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from shared.errors import field_violations
from shared.grpc_client import open_channel
from shared.structs import to_struct
from tests.e2e.conftest import minimal_session

# Only sessions of its own: the session's default group will do (tests/e2e/conftest.py).
SHARED_SERVICES = True

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def refused(call) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, caught.value.details()
    return caught.value


async def test_a_nul_character_in_client_text_is_refused_naming_the_field(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        error = await refused(stub.CreateSession(minimal_session(title="a\x00b")))
        assert [v.field for v in field_violations(error)] == ["title"] and "NUL" in error.details()
        session = (await stub.CreateSession(minimal_session())).session
        action = resources_pb2.PlayerAction(kind="say", text="hello\x00")
        stream = stub.SubmitActions(scheduler_pb2.SubmitActionsRequest(session_id=session.id, actions=[action]))
        error = await refused(stream.read())
        assert [v.field for v in field_violations(error)] == ["actions[0].text"]
        fields = resources_pb2.PlayerAction(kind="say", text="hi", fields=to_struct({"k\x00": "v"}))
        stream = stub.SubmitActions(scheduler_pb2.SubmitActionsRequest(session_id=session.id, actions=[fields]))
        error = await refused(stream.read())
        assert [v.field for v in field_violations(error)] == ["actions[0].fields"]
        turns = await stub.ListTurns(scheduler_pb2.ListTurnsRequest(session_id=session.id))
        assert not [turn for turn in turns.turns if turn.origin == resources_pb2.TURN_ORIGIN_PLAYER]

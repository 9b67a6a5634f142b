"""The story's moves through all five services: rewind, retry (regenerate, edit, delete), versions, branch.

line-probe's counter reads what the line's turn before left in its data (a count and the last player message) and
leaves one more; its `once` runs on the line's second logical turn only. So each turn's output says which state it read.
"""

from __future__ import annotations

import grpc
import pytest

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2
from shared.errors import error_info
from shared.grpc_client import open_channel
from shared.structs import from_struct
from tests.e2e.conftest import minimal_session

SHARED_SERVICES = True
PROBE = "line-probe"

pytestmark = pytest.mark.asyncio(loop_scope="session")


def _outputs(turn: resources_pb2.Turn) -> dict[str, dict]:
    return {result.runtime_id.removeprefix(f"{PROBE}/"): from_struct(result.output) for result in turn.runtime_results
            if result.runtime_id.startswith(PROBE) and result.status == resources_pb2.RUNTIME_STATUS_SUCCESS}


async def _completed(events) -> resources_pb2.Turn:
    turns = [event.turn_completed async for event in events if event.WhichOneof("event") == "turn_completed"]
    assert len(turns) == 1
    assert turns[0].status == store_pb2.TURN_STATUS_COMMITTED, turns[0].abort_reason
    return turns[0]


class Story:
    def __init__(self, stub: scheduler_pb2_grpc.SchedulerStub, session_id: str) -> None:
        self.stub, self.session_id = stub, session_id

    async def say(self, text: str) -> resources_pb2.Turn:
        request = scheduler_pb2.SubmitActionsRequest(session_id=self.session_id, actions=[resources_pb2.PlayerAction(text=text)])
        return await _completed(self.stub.SubmitActions(request))

    async def retry(self, **fields) -> resources_pb2.Turn:
        return await _completed(self.stub.RetryTurn(scheduler_pb2.RetryTurnRequest(session_id=self.session_id, **fields)))

    async def player_lines(self) -> list[str]:
        reply = await self.stub.ListMessages(scheduler_pb2.ListMessagesRequest(session_id=self.session_id))
        return [message.text for message in reply.messages if message.role == resources_pb2.MESSAGE_ROLE_PLAYER]

    async def versions(self) -> tuple[list[str], int]:
        reply = await self.stub.ListTurnVersions(scheduler_pb2.ListTurnVersionsRequest(session_id=self.session_id))
        return [turn.id for turn in reply.versions], reply.chosen


async def _refused(call, reason: str) -> str:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION, caught.value.details()
    assert error_info(caught.value).reason == reason
    return caught.value.details() or ""


async def test_a_rewound_session_reads_the_state_its_turn_left_and_retries_make_versions(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(minimal_session(requested_plugins=[PROBE], approved_plugins=[PROBE]))).session
        story = Story(stub, session.id)
        first = await story.say("I knock.")
        second = await story.say("I enter.")
        assert _outputs(second)["once"] == {"ran": True}
        await story.say("I shout.")
        assert _outputs(await story.say("I listen."))["counter"]["read"] == 3

        # Rewind to the first turn: the next turn reads what it left, and `once` runs again (its run is off the line).
        rewound = (await stub.RewindSession(scheduler_pb2.RewindSessionRequest(session_id=session.id, turn_id=first.id, request_id="rw-1"))).session
        assert (rewound.head_turn_id, rewound.completed_player_turns) == (first.id, 1)
        wait = await story.say("I wait.")
        assert _outputs(wait)["counter"] == {"read": 1, "said": "I knock.", "sourceTurnId": None}
        assert _outputs(wait)["once"] == {"ran": True}
        assert wait.logical_turn == 2 and wait.parent_turn_id == first.id
        assert await story.player_lines() == ["I knock.", "I wait."]
        turns = (await stub.ListTurns(scheduler_pb2.ListTurnsRequest(session_id=session.id))).turns
        assert [turn.off_line for turn in turns] == [False, True, True, True, False], "the rewound turns stay, as history"

        # Regenerate: a new version on the state before it, with ctx.execution.sourceTurnId; then an edited message.
        again = await story.retry(idempotency_key="retry-1")
        assert _outputs(again)["counter"] == {"read": 1, "said": "I knock.", "sourceTurnId": wait.id}
        assert (again.version_of, again.source_turn_id, again.logical_turn) == (wait.id, wait.id, 2)
        assert (await story.retry(idempotency_key="retry-1")).id == again.id, "a resent retry runs nothing"
        edited = await story.retry(replace_actions=True, actions=[resources_pb2.PlayerAction(text="I sing.")])
        assert _outputs(edited)["counter"]["read"] == 1 and edited.version_of == wait.id
        assert await story.player_lines() == ["I knock.", "I sing."]
        assert await story.versions() == ([wait.id, again.id, edited.id], 2)

        # Choose the first version: the next turn reads its state, not the later versions'.
        await stub.SelectTurnVersion(scheduler_pb2.SelectTurnVersionRequest(session_id=session.id, turn_id=wait.id, request_id="v-1"))
        assert await story.versions() == ([wait.id, again.id, edited.id], 0)
        leave = await story.say("I leave.")
        assert _outputs(leave)["counter"] == {"read": 2, "said": "I wait.", "sourceTurnId": None}
        assert await story.player_lines() == ["I knock.", "I wait.", "I leave."]

        # Delete the last message and re-run: the story goes on from the turn before without it.
        deleted = await story.retry(replace_actions=True)
        assert _outputs(deleted)["counter"]["read"] == 2
        assert await story.player_lines() == ["I knock.", "I wait."]

        # Refusals, each with its reason.
        await _refused(stub.RetryTurn(scheduler_pb2.RetryTurnRequest(session_id=session.id, turn_id=first.id)).read(), "TURN_NOT_LAST")
        await _refused(stub.RewindSession(scheduler_pb2.RewindSessionRequest(session_id=session.id, turn_id=second.id)), "TURN_OFF_LINE")
        await _refused(stub.SelectTurnVersion(scheduler_pb2.SelectTurnVersionRequest(session_id=session.id, turn_id=first.id)), "TURN_NOT_LAST")


async def test_a_branch_starts_where_its_turn_left_the_story(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(minimal_session(requested_plugins=[PROBE], approved_plugins=[PROBE]))).session
        story = Story(stub, session.id)
        first = await story.say("I knock.")
        await story.say("I enter.")
        request = scheduler_pb2.BranchSessionRequest(session_id=session.id, turn_id=first.id, request_id="branch-1")
        branch = (await stub.BranchSession(request)).session
        assert (await stub.BranchSession(request)).session.id == branch.id
        assert branch.id != session.id and branch.head_turn_id and branch.completed_player_turns == 1
        branched = Story(stub, branch.id)
        run = await branched.say("I run.")
        assert _outputs(run)["counter"] == {"read": 1, "said": "I knock.", "sourceTurnId": None}
        assert _outputs(run)["once"] == {"ran": True}, "the branch's line has not run it"
        assert await branched.player_lines() == ["I knock.", "I run."]
        # The session it came from goes on as it was.
        assert _outputs(await story.say("I stay."))["counter"]["read"] == 2


async def test_a_retry_reads_what_its_source_turn_committed_before_its_own_operations(services) -> None:
    """operations@1 of a retry: the source turn's committed operations (the stager's ledger entry) come first, then the
    one this execution stages again; a failed runtime's operations are in neither."""
    plugins = ["digest-probe", "service-probe"]
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(requested_plugins=plugins, approved_plugins=plugins))).session
        story = Story(stub, session.id)
        ledger = {"contract": "probe.ledger@1", "summary": "probe.ledger@1 staged plugin.data",
                  "request": {"entry": "kept"}, "result": {"recorded": "kept"}}

        def read(turn: resources_pb2.Turn) -> dict:
            reader = next(r for r in turn.runtime_results if r.runtime_id == "digest-probe/reader")
            return from_struct(reader.output)

        first = await story.say("I look at the gate.")
        assert read(first)["operations"] == {"operations": [ledger]}
        again = await story.retry()
        assert read(again)["operations"] == {"operations": [ledger, ledger]}, "the source's committed operation first"
        assert read(again)["digest"]["turnId"] == again.id and again.source_turn_id == first.id

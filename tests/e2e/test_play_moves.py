"""`covel play`'s story moves against the five services: /approve, /retry, /edit, /versions, /version N, /continue,
/rewind N and /branch N (line-probe's counter says which state each turn read)."""

from __future__ import annotations

import io

import pytest

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel_cli.play import play, scripted_reader
from shared.grpc_client import open_channel
from shared.structs import from_struct
from tests.e2e.conftest import minimal_session

SHARED_SERVICES = True
PROBE = "line-probe"

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def _counted(stub: scheduler_pb2_grpc.SchedulerStub, session_id: str) -> list[tuple[int, bool, int | None]]:
    """(turn number, off the line, what the counter read) of each committed turn."""
    turns = (await stub.ListTurns(scheduler_pb2.ListTurnsRequest(session_id=session_id))).turns
    read = [{r.runtime_id: from_struct(r.output) for r in turn.runtime_results
             if r.status == resources_pb2.RUNTIME_STATUS_SUCCESS}.get(f"{PROBE}/counter", {}).get("read") for turn in turns]
    return [(turn.logical_turn, turn.off_line, count) for turn, count in zip(turns, read, strict=True)
            if turn.status == resources_pb2.TURN_STATUS_COMMITTED]


async def test_the_story_moves_from_the_terminal(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(minimal_session(requested_plugins=[PROBE]))).session
        lines = ["I knock.", f"/approve {PROBE}", "I enter.", "I shout.", "/retry", "/edit I whisper.", "/versions", "/version 1",
                 "/continue", "/rewind 2", "/rewind 99", "/version 7", "/branch 2", "I run."]
        out = io.StringIO()
        assert await play(services.addrs["scheduler"], scripted_reader(lines), out, session_id=session.id) == 0
        shown = out.getvalue()
        assert f"({PROBE} may run its code in this session from the next turn)" in shown
        assert "‹ 2/2 ›" in shown and "‹ 3/3 ›" in shown and "‹ 1/3 ›" in shown
        assert " * 3. " in shown, "/versions marks the chosen one"
        assert "(back to turn 2: the story goes on from there" in shown
        assert "(no turn 99 on the story's line; its turns are 1, 2)" in shown
        assert "(/version takes a number from 1 to 1; /versions lists them)" in shown
        assert "(a new story from turn 2: session " in shown

        # Turn 1 ran before the approval; the retries and the edit read turn 2's state; the chosen first version's
        # state is what /continue (turn 4) read; after the rewind the turns after 2 are history.
        assert await _counted(stub, session.id) == [
            (1, False, None), (2, False, 0), (3, True, 1), (3, True, 1), (3, True, 1), (4, True, 2)]
        branch_id = shown.split("(a new story from turn 2: session ")[1].split(";")[0]
        assert await _counted(stub, branch_id) == [(1, False, None), (2, False, 0), (3, False, 1)]

"""`covel play`'s story moves (docs/api.md "Story moves"): /retry, /edit, /continue, /versions, /version N,
/rewind N, /branch N and /approve <plugin>. N is a turn number as the turn line shows it (`[turn N ...]`): the
last committed turn of that number on the story's line."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TextIO

from covel.scheduler.v1 import resources_pb2 as api
from covel.scheduler.v1 import scheduler_pb2, scheduler_pb2_grpc

# Streams a turn's events and shows the turn (play.py's); its guide's suggestions.
PlayStream = Callable[[Callable[[], AsyncIterator[scheduler_pb2.TurnEvent]]], Awaitable[list[str]]]

MOVE_COMMANDS = ("/retry", "/edit", "/continue", "/versions", "/version", "/rewind", "/approve")
MOVE_HELP = (
    ("/retry", "write the last turn again (a new version; the earlier ones stay)"),
    ("/edit I bow instead.", "change what you did in the last turn, and play it again"),
    ("/continue", "one more story beat without your input"),
    ("/versions, /version 2", "the last turn's versions ‹ 2/3 ›, and choosing one"),
    ("/rewind 3", "back to turn 3: the later turns are kept as history, the story goes on from there"),
    ("/branch 3", "a new session that starts where turn 3 left the story (this one stays as it is)"),
    ("/approve plugin-id", "let a community plugin of this session run its code"),
)


def version_marks(chosen: int, count: int) -> str:
    """The chosen version of how many, in angle quotes ("2/3", 1-based), or "" with a single version."""
    return f"‹ {chosen + 1}/{count} ›" if count > 1 else ""


async def story_move(stub: scheduler_pb2_grpc.SchedulerStub, session_id: str, command: str, rest: str, out: TextIO,
                     stream: PlayStream) -> list[str] | None:
    """One move; the guide's suggestions after a turn it played (None otherwise)."""
    if command in ("/retry", "/edit", "/continue"):
        return await _replay(stub, session_id, command, rest.strip(), out, stream)
    if command == "/versions":
        await show_versions(stub, session_id, out)
    elif command == "/version":
        await _choose_version(stub, session_id, rest.strip(), out)
    elif command == "/rewind":
        turn = await turn_numbered(stub, session_id, rest.strip(), out)
        if turn is not None:
            await stub.RewindSession(scheduler_pb2.RewindSessionRequest(session_id=session_id, turn_id=turn.id, request_id=uuid.uuid4().hex))
            out.write(f"(back to turn {turn.logical_turn}: the story goes on from there; the later turns are kept as history)\n")
    elif command == "/approve":
        await _approve(stub, session_id, rest.strip(), out)
    return None


async def _replay(stub: scheduler_pb2_grpc.SchedulerStub, session_id: str, command: str, text: str, out: TextIO,
                  stream: PlayStream) -> list[str]:
    key = uuid.uuid4().hex
    if command == "/continue":
        request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[api.PlayerAction(kind="advance")], idempotency_key=key,
                                                     batch_events=True)
        return await stream(lambda: stub.SubmitActions(request))
    if command == "/edit" and not text:
        out.write("(/edit needs what you do instead, e.g. /edit I bow instead.)\n")
        return []
    retry = scheduler_pb2.RetryTurnRequest(session_id=session_id, idempotency_key=key, replace_actions=command == "/edit",
                                           actions=[api.PlayerAction(kind="act", text=text)] if text else [])
    suggestions = await stream(lambda: stub.RetryTurn(retry))
    await show_versions(stub, session_id, out, brief=True)
    return suggestions


async def show_versions(stub: scheduler_pb2_grpc.SchedulerStub, session_id: str, out: TextIO, *, brief: bool = False) -> None:
    """The last turn's versions: which of how many (brief), or one line each with its opening words."""
    reply = await stub.ListTurnVersions(scheduler_pb2.ListTurnVersionsRequest(session_id=session_id))
    marks = version_marks(reply.chosen, len(reply.versions))
    if brief:
        if marks:
            out.write(f"  {marks}  (/versions lists them, /version N picks one)\n")
        return
    for number, turn in enumerate(reply.versions, start=1):
        chosen = "*" if number - 1 == reply.chosen else " "
        words = " ".join(turn.narrative.split())[:70] or "(no story)"
        out.write(f" {chosen} {number}. {words}\n")
    out.write(f"  {marks or 'one version'}\n")


async def _choose_version(stub: scheduler_pb2_grpc.SchedulerStub, session_id: str, number: str, out: TextIO) -> None:
    reply = await stub.ListTurnVersions(scheduler_pb2.ListTurnVersionsRequest(session_id=session_id))
    if not number.isdigit() or not 1 <= int(number) <= len(reply.versions):
        out.write(f"(/version takes a number from 1 to {len(reply.versions)}; /versions lists them)\n")
        return
    chosen = reply.versions[int(number) - 1]
    await stub.SelectTurnVersion(scheduler_pb2.SelectTurnVersionRequest(session_id=session_id, turn_id=chosen.id,
                                                                        request_id=uuid.uuid4().hex))
    out.write(f"{version_marks(int(number) - 1, len(reply.versions))}\n{chosen.narrative}\n")


async def turn_numbered(stub: scheduler_pb2_grpc.SchedulerStub, session_id: str, number: str, out: TextIO) -> api.Turn | None:
    """The last committed turn on the story's line whose turn number is `number` (None, said why, if there is none)."""
    turns: list[api.Turn] = []
    token = ""
    while True:
        page = await stub.ListTurns(scheduler_pb2.ListTurnsRequest(session_id=session_id, page_size=500, page_token=token))
        turns.extend(page.turns)
        if not (token := page.next_page_token):
            break
    on_line = [turn for turn in turns if turn.status == api.TURN_STATUS_COMMITTED and not turn.off_line]
    found = [turn for turn in on_line if number.isdigit() and turn.logical_turn == int(number)]
    if not found:
        numbers = sorted({turn.logical_turn for turn in on_line})
        out.write(f"(no turn {number or '?'} on the story's line; its turns are {', '.join(map(str, numbers)) or 'none yet'})\n")
        return None
    return found[-1]


async def branch(stub: scheduler_pb2_grpc.SchedulerStub, session_id: str, number: str, out: TextIO) -> str:
    """/branch N: the new session's id (the one played from now on), or `session_id` when there is no turn N."""
    turn = await turn_numbered(stub, session_id, number, out)
    if turn is None:
        return session_id
    reply = await stub.BranchSession(scheduler_pb2.BranchSessionRequest(session_id=session_id, turn_id=turn.id, request_id=uuid.uuid4().hex))
    out.write(f"(a new story from turn {turn.logical_turn}: session {reply.session.id}; the old one stays as it was: "
              f"covel play --session {session_id})\n")
    return reply.session.id


async def _approve(stub: scheduler_pb2_grpc.SchedulerStub, session_id: str, plugin_id: str, out: TextIO) -> None:
    if not plugin_id:
        out.write("(/approve needs a plugin id: the one a turn said waits for approval)\n")
        return
    await stub.SetPluginApprovals(scheduler_pb2.SetPluginApprovalsRequest(session_id=session_id, approve=[plugin_id]))
    out.write(f"({plugin_id} may run its code in this session from the next turn)\n")

"""A terminal client of the scheduler: `covel play` and `covel demo`."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TextIO

import grpc

from covel.common.v1 import common_pb2
from covel.scheduler.v1 import scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2
from shared.grpc_client import open_client_api_channel

ReadLine = Callable[[], Awaitable[str | None]]

DEMO_ACTIONS = (
    "I push open the door of the inn and look around.",
    "I ask the innkeeper about the old tower on the hill.",
    "At dusk I climb the path to the tower.",
)
STATUS_MARK = {"success": "✓", "failed": "✗", "skipped": "–"}


async def read_terminal_line() -> str | None:
    """input() on a daemon thread, so a stopping program never waits for a key press."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[str | None] = loop.create_future()

    def deliver(line: str | None) -> None:
        if not future.done():
            future.set_result(line)

    def read() -> None:
        try:
            line: str | None = input("\n> ")
        except (EOFError, OSError):
            line = None
        try:
            loop.call_soon_threadsafe(deliver, line)
        except RuntimeError:  # the loop is already closed
            pass

    threading.Thread(target=read, daemon=True).start()
    return await future


def turn_summary(turn: store_pb2.Turn, elapsed_s: float) -> str:
    parts = [
        f"{STATUS_MARK.get(r.status, '?')} {r.runtime_id}" + (f" ({r.reason})" if r.reason else "")
        for r in turn.runtime_results
    ]
    status = store_pb2.TurnStatus.Name(turn.status).removeprefix("TURN_STATUS_").lower()
    return f"[turn {turn.logical_turn} {status} in {elapsed_s:.2f}s: {', '.join(parts) or 'no runtimes'}]"


async def play_turn(stub: scheduler_pb2_grpc.SchedulerStub, session_id: str, text: str, out: TextIO) -> store_pb2.Turn | None:
    started = time.monotonic()
    request = scheduler_pb2.SubmitActionsRequest(
        session_id=session_id,
        actions=[common_pb2.PlayerAction(kind="do", text=text)],
        idempotency_key=uuid.uuid4().hex,
    )
    completed = None
    streamed = False
    segment_start = True
    async for event in stub.SubmitActions(request):
        kind = event.WhichOneof("event")
        if kind == "narrative_delta":
            delta = event.narrative_delta
            if not streamed:
                out.write("\n")
                streamed = True
            if delta.reset:
                out.write("\n(the narrator revises this…)\n")
                segment_start = True
                continue
            if delta.text == "\n\n":
                segment_start = True
                out.write(delta.text)
                continue
            if segment_start and delta.segment.kind == "dialogue" and delta.segment.speaker:
                out.write(f"{delta.segment.speaker}: ")
            segment_start = False
            out.write(delta.text)
            out.flush()
        elif kind == "turn_completed":
            completed = event.turn_completed
    if completed is None:
        return None
    if completed.status == store_pb2.TURN_STATUS_ABORTED:
        out.write(f"\n(turn stopped: {completed.abort_reason})")
    elif completed.status == store_pb2.TURN_STATUS_FAILED:
        out.write(f"\n(turn failed, nothing was saved: {completed.abort_reason})")
    out.write(f"\n{turn_summary(completed, time.monotonic() - started)}\n")
    out.flush()
    return completed


async def play(
    scheduler_addr: str,
    read_line: ReadLine,
    out: TextIO = sys.stdout,
    *,
    requested_plugins: list[str] | None = None,
    session_id: str = "",
    echo_input: bool = False,
) -> int:
    """Play turn by turn until read_line gives None or /quit. Returns an exit code."""
    async with open_client_api_channel(scheduler_addr) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        if not session_id:
            try:
                created = await stub.CreateSession(
                    scheduler_pb2.CreateSessionRequest(requested_plugins=requested_plugins or [], title="covel play")
                )
            except grpc.aio.AioRpcError as error:
                # UNAUTHENTICATED says which token to set; UNAVAILABLE that the scheduler is not reachable.
                out.write(f"(error {error.code().name}: {error.details()})\n")
                return 1
            session_id = created.session.id
            out.write(f"Session {session_id} · plugins: {', '.join(created.session.active_plugins) or 'none'}\n")
            for rejected in created.rejected:
                out.write(f"  (plugin {rejected.plugin_id} not enabled: {rejected.reason})\n")
        out.write("Type what you do; /quit to leave.\n")
        out.flush()
        while True:
            line = await read_line()
            if line is None or line.strip() in ("/quit", "/exit"):
                out.write("\nGoodbye.\n")
                return 0
            if not line.strip():
                continue
            if echo_input:
                out.write(f"\n> {line}\n")
            try:
                await play_turn(stub, session_id, line.strip(), out)
            except grpc.aio.AioRpcError as error:
                out.write(f"\n(error {error.code().name}: {error.details()})\n")
                if error.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.NOT_FOUND):
                    return 1


def scripted_reader(lines: tuple[str, ...] | list[str]) -> ReadLine:
    queue = list(lines)

    async def read() -> str | None:
        return queue.pop(0) if queue else None

    return read

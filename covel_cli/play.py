"""A terminal client of the scheduler: `covel play` and `covel demo`.

It streams the story as it is written, then shows what the builtin plugins did this turn (dice,
inventory, time, affinity), the guide's suggestions (type a number to take one) and one compact
line of every runtime with its status and time. `/roll 2d6+1` rolls dice (dice-check/roll); `/help` lists the commands.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shlex
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from typing import TextIO

import grpc

from covel.scheduler.v1 import resources_pb2 as api
from covel.scheduler.v1 import scheduler_pb2, scheduler_pb2_grpc
from covel_cli.play_display import Progress, plugin_lines, shown_lines, turn_summary
from covel_cli.play_moves import MOVE_COMMANDS, MOVE_HELP, branch, story_move
from services.scheduler.public_api import enum_text
from shared.errors import retry_after_ms
from shared.grpc_client import open_client_api_channel
from shared.structs import from_struct, to_struct
from shared.turn_event_batches import each_event
from shared.ui_panels import render_text

ReadLine = Callable[[], Awaitable[str | None]]

# The world `covel play`, `covel demo` and `make run` start in (worlds/demo-world).
DEFAULT_WORLD = "demo-world"
# A submit is sent again on these (with RetryInfo, or the scheduler unreachable), for up to this long.
RETRIED_CODES = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.ABORTED, grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.DEADLINE_EXCEEDED)
RETRY_FOR_S = 30.0
DEMO_ACTIONS = (
    # The setup's character form (char-creator), answered: the name and two of Saltmere's attributes.
    '/answer name=Wren "role=a lamp-maker from the south" courage=4',
    "I push open the door of the Drowned Lantern and look around.",
    "I promise Mira I will find the missing boats.",
    "I ask Old Tobin about the dark lighthouse and thank him for the warm fire.",
    "I pick up the rusty key from the table and light the lantern.",
    "I tell Mira that Sela only wants to mend the lens; Mira now trusts Sela.",
    "At dusk I climb the cliff path to the lighthouse.",
    "/roll 2d6+1",
    "/panels",
)
COMMANDS = (
    ("/help", "list these commands"),
    ("/say Hello there.", "what your character says (anything else is what it does)"),
    ("/kinds", "the session's action kinds and seats"),
    ('/kind demo-world/ask {"topic": "the lens"}', "an action of any kind, with its text and its fields as JSON"),
    ("/as mira", "play another of your seat's characters from the next turn"),
    ("/roll 2d6+1", "roll dice (the dice-check plugin)"),
    ("/answer name=Mira", "answer the open question: a form's field=value pairs, a choice's option, yes or no"),
    ("/commands", "the commands of the session's plugins (any other /name runs one)"),
    ("/panels", "the plugins' panels (character, inventory, standing, time) as short summaries"),
    *MOVE_HELP,
    ("/quit, /exit", "leave (the session stays; play it again with --session ID)"),
    ("a number", "take one of the guide's suggestions"),
    ("anything else", "what your character says or does this turn"),
)


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
        with contextlib.suppress(RuntimeError):  # the loop is already closed
            loop.call_soon_threadsafe(deliver, line)

    threading.Thread(target=read, daemon=True).start()
    return await future


async def _stream_retried(submit: Callable[[], AsyncIterator[scheduler_pb2.TurnEvent]], out: TextIO) -> api.Turn | None:
    """A submit streamed (a stream that asked for batches opened: each_event), and sent again (the same request: its idempotency key) while the error says a retry
    may pass (docs/retries.md): a service restarting, the session still busy, the queue full."""
    give_up = time.monotonic() + RETRY_FOR_S
    while True:
        try:
            return await _stream_turn(submit(), out, Progress(out))
        except grpc.aio.AioRpcError as error:
            wait_ms = retry_after_ms(error)
            if error.code() not in RETRIED_CODES or (wait_ms is None and error.code() != grpc.StatusCode.UNAVAILABLE):
                raise
            wait_s = (wait_ms or 1_000) / 1000
            if time.monotonic() + wait_s > give_up:
                raise
            out.write(f"\n({error.details() or 'the story service is restarting'}; trying again in {wait_s:g} s)\n")
            out.flush()
            await asyncio.sleep(wait_s)


async def _stream_turn(events: AsyncIterator[scheduler_pb2.TurnEvent], out: TextIO, progress: Progress) -> api.Turn | None:
    completed = None
    streaming = False
    segment_start = True
    progress.start()
    try:
        async for event in each_event(events):
            kind = event.WhichOneof("event")
            if kind == "turn_started" and event.turn_started.steered_by:
                # admit_message steered the message into the turn already running: this is that turn.
                progress.pause()
                out.write(f"\n(your words join the turn already under way, as {event.turn_started.steered_by} decided)\n")
                out.flush()
                progress.start()
            elif kind == "runtime_started":
                progress.running.append(event.runtime_started.runtime_id)
            elif kind == "runtime_finished":
                with contextlib.suppress(ValueError):
                    progress.running.remove(event.runtime_finished.runtime_id)
            elif kind == "narrative_delta":
                delta = event.narrative_delta
                if not streaming:
                    progress.pause()
                    out.write("\n")
                    streaming = True
                if delta.reset:
                    out.write("\n(the narrator revises this…)\n")
                    segment_start = True
                    continue
                if delta.text == "\n\n":
                    segment_start = True
                    out.write(delta.text)
                    continue
                if segment_start and delta.segment.kind == api.SEGMENT_KIND_DIALOGUE and delta.segment.speaker:
                    out.write(f"{delta.segment.speaker}: ")
                segment_start = False
                out.write(delta.text)
                out.flush()
            elif kind == "turn_completed":
                completed = event.turn_completed
    finally:
        progress.pause()
    return completed


def _show_turn(completed: api.Turn, started: float, out: TextIO) -> list[str]:
    if completed.status == api.TURN_STATUS_ABORTED:
        out.write(f"\n(turn stopped: {completed.abort_reason})")
    elif completed.status == api.TURN_STATUS_FAILED:
        out.write(f"\n(turn failed, nothing was saved: {completed.abort_reason})")
    lines, suggestions = plugin_lines(completed)
    out.write("\n")
    for line in lines:
        out.write(f"\n  {line}")
    if suggestions:
        out.write("\n\n  What next?")
        for number, suggestion in enumerate(suggestions, start=1):
            out.write(f"\n   {number}. {suggestion}")
    out.write(f"\n{turn_summary(completed, time.monotonic() - started)}\n")
    out.flush()
    return suggestions


async def play_turn(stub: scheduler_pb2_grpc.SchedulerStub, session_id: str, text: str, out: TextIO) -> api.Turn | None:
    turn, _ = await _play_turn(stub, session_id, text, out)
    return turn


async def _play_turn(stub: scheduler_pb2_grpc.SchedulerStub, session_id: str, text: str, out: TextIO, kind: str = "act",
                     fields: dict | None = None) -> tuple[api.Turn | None, list[str]]:
    started = time.monotonic()
    request = scheduler_pb2.SubmitActionsRequest(
        session_id=session_id,
        actions=[api.PlayerAction(kind=kind, text=text, fields=to_struct(fields) if fields else None)],
        idempotency_key=uuid.uuid4().hex,
        batch_events=True,
    )
    completed = await _stream_retried(lambda: stub.SubmitActions(request), out)
    return (completed, _show_turn(completed, started, out)) if completed is not None else (None, [])


async def _shown(out: TextIO, submit: Callable[[], AsyncIterator[scheduler_pb2.TurnEvent]]) -> list[str]:
    """A move's turn streamed and shown; the guide's suggestions."""
    started = time.monotonic()
    completed = await _stream_retried(submit, out)
    return _show_turn(completed, started, out) if completed is not None else []


ACTION_COMMANDS = ("/roll", "/kinds", "/as", "/say", "/kind", "/answer")
YES, NO = ("yes", "y", "true"), ("no", "n", "false")


def answer_values(interaction: api.Interaction, words: list[str]) -> dict:
    """What `/answer` words mean for an interaction: a choice's option (its id, number or label), yes / no, or a
    form's field=value pairs (a value that reads as JSON is that JSON, else text)."""
    if interaction.kind == api.INTERACTION_KIND_CHOICE:
        options = from_struct(interaction.spec).get("options") or []
        said = " ".join(words).strip().lower()
        for number, option in enumerate(options, start=1):
            if said in (str(option.get("id")).lower(), str(number), str(option.get("label")).lower()):
                return {"option": option.get("id")}
        return {"option": said}
    if interaction.kind == api.INTERACTION_KIND_CONFIRM:
        said = (words[0] if words else "").lower()
        return {"confirmed": True if said in YES else False if said in NO else said}
    values: dict = {}
    for word in words:
        name, _, raw = word.partition("=")
        try:
            values[name] = json.loads(raw)
        except json.JSONDecodeError:
            values[name] = raw
    return values


async def answer(stub: scheduler_pb2_grpc.SchedulerStub, session_id: str, rest: str, out: TextIO) -> list[str]:
    """/answer [id] ...: the open interaction it names (else the newest), answered with SubmitInteraction."""
    open_ones = [r.interaction for r in (await stub.ListInteractions(scheduler_pb2.ListInteractionsRequest(session_id=session_id))).interactions]
    if not open_ones:
        out.write("(nothing to answer: no open question)\n")
        return []
    words = shlex.split(rest)
    asked = next((i for i in open_ones if words and i.id == words[0]), None)
    if asked is not None:
        words = words[1:]
    asked = asked or open_ones[-1]
    started = time.monotonic()
    request = scheduler_pb2.SubmitInteractionRequest(session_id=session_id, interaction_id=asked.id,
                                                     values=to_struct(answer_values(asked, words)), idempotency_key=uuid.uuid4().hex)
    completed = await _stream_retried(lambda: stub.SubmitInteraction(request), out)
    return _show_turn(completed, started, out) if completed is not None else []


def action_of(command: str, rest: str) -> tuple[str, str, dict | None]:
    """(kind, text, fields) of a line: plain text acts, /say says, /kind <kind> <text> {json fields}."""
    if command == "/say":
        return "say", rest.strip(), None
    if command != "/kind":
        return "act", rest.strip(), None
    kind, _, tail = rest.strip().partition(" ")
    text, brace, json_part = tail.partition("{")
    try:
        fields = json.loads(brace + json_part) if brace else None
    except json.JSONDecodeError:
        fields = None
        text = tail
    return kind, text.strip(), fields if isinstance(fields, dict) else None


async def show_action_kinds(stub: scheduler_pb2_grpc.SchedulerStub, session_id: str, out: TextIO) -> None:
    reply = await stub.ListActionKinds(scheduler_pb2.ListActionKindsRequest(session_id=session_id))
    for kind in reply.kinds:
        fields = ", ".join(from_struct(kind.fields_schema).get("properties", {})) if kind.HasField("fields_schema") else ""
        out.write(f"  {kind.kind:<24} {kind.label} ({'/'.join(enum_text(api.SeatRole.DESCRIPTOR, role) for role in kind.roles)}; text {enum_text(api.TextRule.DESCRIPTOR, kind.text)}"
                  + (f"; fields: {fields}" if fields else "") + ")\n")
    for seat in reply.seats:
        playing = f"plays {seat.character_id}" if seat.character_id else "plays no character"
        out.write(f"  seat {seat.id} ({enum_text(api.SeatRole.DESCRIPTOR, seat.role)}): {playing}" + (f"; may play {', '.join(seat.character_ids)}" if seat.character_ids else "") + "\n")


async def switch_character(stub: scheduler_pb2_grpc.SchedulerStub, session_id: str, character_id: str, out: TextIO) -> None:
    reply = await stub.SwitchCharacter(scheduler_pb2.SwitchCharacterRequest(session_id=session_id, character_id=character_id))
    main = next(seat for seat in reply.session.seats if seat.id == "main")
    out.write(f"(from the next turn you play {main.character_id})\n")


async def roll_dice(stub: scheduler_pb2_grpc.SchedulerStub, session_id: str, expression: str, out: TextIO) -> api.Turn | None:
    """/roll: the dice-check plugin's manual runtime."""
    started = time.monotonic()
    request = scheduler_pb2.RunManualRequest(session_id=session_id, runtime_id="dice-check/roll",
                                             payload=to_struct({"expression": expression or "d20"}), idempotency_key=uuid.uuid4().hex)
    completed = await _stream_turn(stub.RunManual(request), out, Progress(out))
    if completed is not None:
        _show_turn(completed, started, out)
    return completed


async def show_panels(stub: scheduler_pb2_grpc.SchedulerStub, session_id: str, out: TextIO) -> None:
    """Each panel of the session's plugins as a few text lines (shared/ui_panels.render_text)."""
    panels = (await stub.ListPanels(scheduler_pb2.ListPanelsRequest(session_id=session_id))).panels
    if not panels:
        out.write("(no plugin of this session has a panel)\n")
    for panel in panels:
        lines = render_text(from_struct(panel.spec), from_struct(panel.state))
        out.write(f"▤ {lines[0] if lines else panel.plugin_id} ({panel.plugin_id}, {enum_text(api.UiSlot.DESCRIPTOR, panel.location)})\n")
        out.write("".join(f"    {line}\n" for line in lines[1:]))


async def show_commands(stub: scheduler_pb2_grpc.SchedulerStub, session_id: str, out: TextIO) -> None:
    """/commands: the session's plugin commands (ListCommands), one line each."""
    commands = (await stub.ListCommands(scheduler_pb2.ListCommandsRequest(session_id=session_id))).commands
    if not commands:
        out.write("(the session's plugins have no commands)\n")
    for command in commands:
        arguments = " ".join(f"<{a.name}{'...' if a.variadic else ''}>" if a.required else f"[{a.name}{'...' if a.variadic else ''}]"
                             for a in command.arguments)
        out.write(f"  /{command.name} {arguments}".rstrip() + f"  {command.description} ({command.plugin_id})\n")


async def run_command(stub: scheduler_pb2_grpc.SchedulerStub, session_id: str, line: str, out: TextIO) -> None:
    """Any other /name line: a plugin command (RunCommand); its result, and what its action showed."""
    ran = await stub.RunCommand(scheduler_pb2.RunCommandRequest(session_id=session_id, text=line, idempotency_key=uuid.uuid4().hex))
    failed = [r for r in ran.turn.runtime_results if r.status == api.RUNTIME_STATUS_FAILED]
    if failed:
        out.write(f"(the command failed: {failed[0].reason})\n")
    elif ran.result_json not in ("null", ""):
        out.write(f"{ran.result_json}\n")
    for result in ran.turn.runtime_results:
        for shown in shown_lines(result):
            out.write(f"  {shown}\n")


async def play(
    scheduler_addr: str,
    read_line: ReadLine,
    out: TextIO = sys.stdout,
    *,
    requested_plugins: list[str] | None = None,
    session_id: str = "",
    echo_input: bool = False,
    world_id: str = "",
    opening_id: str = "",
) -> int:
    """Play turn by turn until read_line gives None or /quit. Returns an exit code."""
    async with open_client_api_channel(scheduler_addr) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        if not session_id:
            try:
                session_id = await _create_session(stub, out, requested_plugins or [], world_id, opening_id)
            except grpc.aio.AioRpcError as error:
                # UNAUTHENTICATED says which token to send.
                out.write(error_line(error, scheduler_addr) + "\n")
                return 1
        out.write("Type what you do (a number takes a suggestion); /roll 2d6 rolls dice; /help lists commands; /quit to leave.\n")
        out.flush()
        suggestions: list[str] = await start_setup(stub, session_id, out)
        while True:
            line = await read_line()
            if line is None or line.strip() in ("/quit", "/exit"):
                out.write("\nGoodbye.\n")
                return 0
            line = line.strip()
            if not line:
                continue
            if line.isdigit() and 1 <= int(line) <= len(suggestions):
                line = suggestions[int(line) - 1]
            if echo_input:
                out.write(f"\n> {line}\n")
            if line in ("/help", "/?"):
                out.write(help_text())
                continue
            try:
                if line.split(" ", 1)[0] == "/branch":
                    session_id = await branch(stub, session_id, line.partition(" ")[2].strip(), out)
                    continue
                suggestions = await _one_line(stub, session_id, line, out) or suggestions
            except grpc.aio.AioRpcError as error:
                out.write("\n" + error_line(error, scheduler_addr) + "\n")
                if error.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.NOT_FOUND):
                    return 1


async def start_setup(stub: scheduler_pb2_grpc.SchedulerStub, session_id: str, out: TextIO) -> list[str]:
    """A session in its setup phase starts it with an `advance` (the setup plugins ask their forms; a setup with
    nothing to ask goes straight on to the opening); its open questions are shown again on a resumed session."""
    session = (await stub.GetSession(scheduler_pb2.GetSessionRequest(session_id=session_id))).session
    if session.phase != api.SESSION_PHASE_SETUP or await show_open_questions(stub, session_id, out):
        return []
    out.write("\n(setting up the story…)\n")
    _, suggestions = await _play_turn(stub, session_id, "", out, "advance")
    return suggestions


async def show_open_questions(stub: scheduler_pb2_grpc.SchedulerStub, session_id: str, out: TextIO, lead: str = "") -> bool:
    """The session's open questions, one line each (after `lead`); whether there were any."""
    asked = (await stub.ListInteractions(scheduler_pb2.ListInteractionsRequest(session_id=session_id))).interactions
    if asked:
        out.write(lead + "\n".join(shown_lines(api.RuntimeResult(interactions=[r.interaction for r in asked]))) + "\n")
    return bool(asked)


async def remind_open_questions(stub: scheduler_pb2_grpc.SchedulerStub, session_id: str, turn: api.Turn | None, out: TextIO) -> None:
    """A setup turn that told no story (a question still waits for its answer) shows the open questions again."""
    if turn is not None and not turn.narrative and turn.status == api.TURN_STATUS_COMMITTED:
        await show_open_questions(stub, session_id, out, lead="  (the story starts once this is answered)\n")


async def _one_line(stub: scheduler_pb2_grpc.SchedulerStub, session_id: str, line: str, out: TextIO) -> list[str] | None:
    """One line of the player's: a command, or a turn; the guide's new suggestions after a turn (None otherwise)."""
    command, _, rest = line.partition(" ") if line.startswith("/") else ("", "", line)
    if command == "/commands":
        await show_commands(stub, session_id, out)
    elif command == "/panels":
        await show_panels(stub, session_id, out)
    elif command in MOVE_COMMANDS:
        return await story_move(stub, session_id, command, rest, out, partial(_shown, out))
    elif command and command not in ACTION_COMMANDS:
        try:
            await run_command(stub, session_id, line, out)
        except grpc.aio.AioRpcError as error:
            if error.code() not in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT):
                raise
            out.write(f"({error.details()}; /help and /commands list what you can type)\n")
    elif command == "/answer":
        return await answer(stub, session_id, rest, out)
    elif command == "/roll":
        await roll_dice(stub, session_id, rest.strip(), out)
    elif command == "/kinds":
        await show_action_kinds(stub, session_id, out)
    elif command == "/as":
        await switch_character(stub, session_id, rest.strip(), out)
    else:
        kind, text, fields = action_of(command, rest)
        turn, suggestions = await _play_turn(stub, session_id, text, out, kind, fields)
        await remind_open_questions(stub, session_id, turn, out)
        return suggestions
    return None


async def _create_session(stub: scheduler_pb2_grpc.SchedulerStub, out: TextIO, requested_plugins: list[str], world_id: str,
                          opening_id: str = "") -> str:
    """A new session in the world `world_id` (the scheduler reads the world package) with the requested
    plugins besides the world's; prints what it started with, the opening (`opening_id`: one of the world's
    openings) and the other openings there are."""
    world = (await stub.GetWorld(scheduler_pb2.GetWorldRequest(world_id=world_id))).world if world_id else None
    request = scheduler_pb2.CreateSessionRequest(requested_plugins=requested_plugins, world_id=world_id, opening_id=opening_id,
                                                 title="" if world_id else "covel play")
    created = await stub.CreateSession(request)
    session_id = created.session.id
    out.write(f"Session {session_id} · plugins: {', '.join(created.session.active_plugins) or 'none'}\n")
    for rejected in created.rejected:
        out.write(f"  (plugin {rejected.plugin_id} not enabled: {rejected.reason})\n")
    if world is not None:
        opening = next((o.text for o in world.openings if o.id == opening_id), world.opening)
        if opening:
            out.write(f"\n{world.name}\n\n{opening}\n")
        others = [o.id for o in world.openings if o.id != opening_id]
        if others:
            out.write(f"  (other openings: {', '.join(others)}; `covel play --world {world.id} --opening <id>`)\n")
    return session_id


def world_line(world: api.World) -> str:
    """`demo-world  Saltmere — The Covel authors · 0.2.0`, or the world's first problem when it failed."""
    if world.state != api.WORLD_STATE_LOADED:
        first = next(iter(world.diagnostics), None)
        why = f"{first.file}:{first.field_path}: {first.message}" if first is not None else "see its diagnostics"
        return f"{world.id}  (failed to load: {why})"
    by = " · ".join(part for part in (from_struct(world.author).get("name", ""), world.version) if part)
    return f"{world.id}  {world.name}" + (f" — {by}" if by else "")


async def list_worlds(scheduler_addr: str, out: TextIO = sys.stdout) -> int:
    """`covel worlds`: the worlds a session can start in (ListWorlds)."""
    async with open_client_api_channel(scheduler_addr) as channel:
        try:
            worlds = (await scheduler_pb2_grpc.SchedulerStub(channel).ListWorlds(scheduler_pb2.ListWorldsRequest())).worlds
        except grpc.aio.AioRpcError as error:
            out.write(error_line(error, scheduler_addr) + "\n")
            return 1
    for world in worlds:
        out.write(world_line(world) + "\n")
    if not worlds:
        out.write("(no worlds: put world packages in the world folders, COVEL_WORLD_DIRS)\n")
    return 0


def help_text() -> str:
    width = max(len(command) for command, _ in COMMANDS)
    return "".join(f"  {command:<{width}}  {what}\n" for command, what in COMMANDS)


def error_line(error: grpc.aio.AioRpcError, scheduler_addr: str) -> str:
    """One line a player can act on: an unreachable scheduler is named with how to start it; other
    errors keep the service's own message, cut to one line."""
    if error.code() == grpc.StatusCode.UNAVAILABLE and "connect" in (error.details() or "").lower():
        return f"(the scheduler at {scheduler_addr} is not reachable: start the services with `covel up`, or set COVEL_SCHEDULER_ADDR)"
    details = " ".join((error.details() or "").split())
    return f"(error {error.code().name}: {details[:300]})"


def scripted_reader(lines: tuple[str, ...] | list[str]) -> ReadLine:
    queue = list(lines)

    async def read() -> str | None:
        return queue.pop(0) if queue else None

    return read

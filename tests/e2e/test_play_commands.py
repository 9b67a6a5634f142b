"""`covel play`'s own commands and its one-line errors."""

from __future__ import annotations

import io
import json
import re

import pytest

from covel.scheduler.v1 import scheduler_pb2, scheduler_pb2_grpc
from covel_cli.launcher import free_port_addrs, last_problem
from covel_cli.play import COMMANDS, play, scripted_reader
from shared.grpc_client import open_channel

# Its own sessions only: the session's shared group (tests/e2e/conftest.py).
SHARED_SERVICES = True


@pytest.mark.asyncio(loop_scope="session")
async def test_help_lists_the_commands_and_an_unknown_one_points_to_it(services) -> None:
    out = io.StringIO()
    assert await play(services.addrs["scheduler"], scripted_reader(["/help", "/teleport home", "/commands"]), out) == 0
    shown = out.getvalue()
    for command, what in COMMANDS:
        assert command in shown and what in shown
    assert "(text: no command /teleport in this session" in shown and "/help and /commands list what you can type)" in shown
    assert shown.count("[turn") == 1 and "(setting up the story…)" in shown, "only the start of the setup played a turn, no command did"


@pytest.mark.asyncio(loop_scope="session")
async def test_an_unreachable_scheduler_is_one_clear_line() -> None:
    addr = free_port_addrs()["scheduler"]
    out = io.StringIO()
    assert await play(addr, scripted_reader(["I look around."]), out) == 1
    assert out.getvalue().splitlines() == [
        f"(the scheduler at {addr} is not reachable: start the services with `covel up`, or set COVEL_SCHEDULER_ADDR)"]


def test_last_problem_reads_a_json_error_or_a_traceback() -> None:
    json_log = [
        json.dumps({"event": "server.ready", "level": "info"}),
        json.dumps({"event": "database.unreachable", "level": "error", "error": "connection refused"}),
        json.dumps({"event": "server.stopping", "level": "info"}),
    ]
    assert last_problem(json_log) == "database.unreachable: connection refused"
    crash = ["Traceback (most recent call last):", '  File "x.py", line 1, in <module>', "    boom()",
             "    ^^^^^^", "ValueError: the port is not a number"]
    assert last_problem(json_log + crash) == "ValueError: the port is not a number"
    with_exception = [json.dumps({"event": "rpc.failed", "level": "error", "exception": "Traceback …\nKeyError: 'x'"})]
    assert last_problem(with_exception) == "rpc.failed: KeyError: 'x'"
    assert last_problem([json.dumps({"event": "fine", "level": "info"})]) == ""
    assert last_problem(["COVEL_READY gateway 42115"]) == ""
    assert len(last_problem(["RuntimeError: " + "E" * 1000])) == 300


@pytest.mark.asyncio(loop_scope="session")
async def test_kinds_say_kind_and_as_play_the_demo_worlds_kinds_and_seat(services) -> None:
    """In the demo world: /kinds lists the session's kinds and seat, /say and /kind submit those kinds
    (demo-world/ask with its fields), /as switches the seat's character, and a bad one is one clear line."""
    out = io.StringIO()
    lines = ["/kinds", "/say Good evening.", '/kind demo-world/ask Tell me. {"topic": "the lens", "whom": "Sela"}',
             "/as mira", '/kind demo-world/ask {"subject": "x"}']
    assert await play(services.addrs["scheduler"], scripted_reader(lines), out, world_id="demo-world") == 0
    shown = out.getvalue()
    assert "demo-world/ask" in shown and "asks about" in shown and "topic" in shown and "whom" in shown, shown
    assert "seat main (player): plays traveller" in shown
    assert shown.count("[turn") >= 2
    assert "INVALID_ARGUMENT" in shown and "character_id" in shown  # mira is no player character
    assert "actions[0].fields" in shown


@pytest.mark.asyncio(loop_scope="session")
async def test_a_plugin_command_runs_from_the_terminal(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        session = (await scheduler_pb2_grpc.SchedulerStub(channel).CreateSession(scheduler_pb2.CreateSessionRequest(
            requested_plugins=["effects-probe"], approved_plugins=["effects-probe"]))).session
    out = io.StringIO()
    reader = scripted_reader(["/commands", "/note people Old Tobin", "/note"])
    assert await play(services.addrs["scheduler"], reader, out, session_id=session.id) == 0
    shown = out.getvalue()
    assert "/note <topic> [words...]  Write a note in the plugin's notes dataset. (effects-probe)" in shown
    # covel play started the setup first (an `advance`, a player message: turnNumber 1); the form still waits.
    assert re.search(r'\{"saved": "people-\d+", "phase": "setup", "turnNumber": 1\}', shown), shown
    assert "(text: /note needs <topic>; /help and /commands list what you can type)" in shown


@pytest.mark.asyncio(loop_scope="session")
async def test_a_form_is_shown_and_answered_from_the_terminal(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        session = (await scheduler_pb2_grpc.SchedulerStub(channel).CreateSession(scheduler_pb2.CreateSessionRequest(
            requested_plugins=["effects-probe"], approved_plugins=["effects-probe"]))).session
    out = io.StringIO()
    reader = scripted_reader(["Hello", "/answer name=Nobody", '/answer hero-name name="Mira Vale"', "/answer name=Again"])
    assert await play(services.addrs["scheduler"], reader, out, session_id=session.id) == 0
    shown = out.getvalue()
    assert "? Your hero: name · /answer name=…" in shown
    assert "Nobody is not a name" in shown, "the plugin's validator refused it: one clear line"
    assert "✓ Welcome, Mira Vale." not in shown and "ℹ Welcome, Mira Vale." in shown
    assert "(nothing to answer: no open question)" in shown

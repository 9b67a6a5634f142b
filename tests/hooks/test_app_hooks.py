"""The app hooks the hooks service calls (services/hooks/plugin_side/app_hooks.py): build_tape_context on
PostContextAssembly and provide_tape_sidecar on message:sent, loaded from a real entry module."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.hooks.dispatcher import ExecutionContext, HandlerTable, dispatch
from services.hooks.in_process import load_entries
from services.hooks.plugin_entries import PluginEntry
from shared.plugin_sdk.event_keys import InternalEvent

pytestmark = pytest.mark.asyncio(loop_scope="session")

TAPES = '''
from shared.plugin_sdk.hookspecs import TapeContext, hookimpl

APPENDED = []


class Recent:
    @hookimpl
    def build_tape_context(self):
        def select(tape):
            if tape.entries()[-1]["content"] == "raise":
                raise RuntimeError("select bug")
            return tape.entries()[-2:]
        return TapeContext(select=select, render=lambda entry: {**entry, "content": entry["content"].upper()})

    @hookimpl
    def build_prompt(self, message, session_id, state):
        return "built: " + message["content"]


class Mirror:
    def on_append(self, tape, entry):
        APPENDED.append((tape, entry["role"], entry["content"]))


class Broken:
    def on_append(self, tape, entry):
        raise RuntimeError("sidecar bug")


class Sidecars:
    @hookimpl
    def provide_tape_sidecar(self):
        return Mirror()


class BrokenSidecars:
    """Registered last: its sidecar is told first, and raises."""

    @hookimpl
    def provide_tape_sidecar(self):
        return Broken()


def register(covel):
    covel.register_hookimpls(Recent())
    covel.register_hookimpls(Sidecars())
    covel.register_hookimpls(BrokenSidecars())
'''


@pytest.fixture
def tapes(tmp_path: Path):
    (tmp_path / "tapes" / "server").mkdir(parents=True)
    (tmp_path / "tapes" / "server" / "index.py").write_text(TAPES)
    entry = PluginEntry("tapes", tmp_path / "tapes", "server/index.py", (("TurnStart", "normal"), ("PostContextAssembly", "normal")),
                        "builtin")
    result = load_entries([entry], generation=1)
    assert result.errors == {}, result.errors
    module = __import__("sys").modules["covel_plugin_tapes_g1.server.index"]
    module.APPENDED.clear()
    return HandlerTable(result.loaded[0].registrar.hooks, {"tapes": "builtin"}), result.loaded[0], module.APPENDED


EXECUTION = ExecutionContext(session_id="s", turn_id="t1", locale="en", active_plugin_ids=("tapes",), plugin_id="tapes",
                             runtime_id="narrator")


async def test_build_tape_context_selects_and_renders_the_conversation_before_build_prompt(tapes) -> None:
    table, _, _ = tapes
    messages = [{"role": "user", "content": "one"}, {"role": "assistant", "content": "two"}, {"role": "user", "content": "three"}]
    result = await dispatch(table, "PostContextAssembly", EXECUTION, {"systemPrompt": "", "messages": messages})
    assert result.payload["messages"] == [{"role": "assistant", "content": "TWO"}, {"role": "user", "content": "built: THREE"}]
    raising = [{"role": "user", "content": "raise"}]
    result = await dispatch(table, "PostContextAssembly", EXECUTION, {"systemPrompt": "", "messages": raising})
    assert result.payload["messages"] == [{"role": "user", "content": "built: raise"}], "a raising select is skipped"


async def test_sidecars_hear_each_turns_message_and_story_and_one_that_raises_is_skipped(tapes) -> None:
    table, loaded, appended = tapes
    await dispatch(table, "TurnStart", ExecutionContext(session_id="s", turn_id="t1", locale="en", active_plugin_ids=("tapes",)),
                   {"playerMessage": "I knock.", "actions": []})
    [handler] = loaded.registrar.event_handlers
    await handler.handler(InternalEvent("message:sent", "s", {"to": "s", "content": "The door opens.", "success": True}))
    assert appended == [("s", "user", "I knock."), ("s", "story", "The door opens.")]


INBOX = '''
from shared.plugin_sdk.hookspecs import hookimpl


class Inbox:
    def __init__(self):
        self.waiting = {"s": [{"content": "Psst!"}, "and the lamp?", {"content": ""}]}

    def drain(self, session_id):
        return self.waiting.pop(session_id, [])


class Steering:
    @hookimpl
    def provide_steering_inbox(self):
        return Inbox()


def register(covel):
    covel.register_hookimpls(Steering())
'''


async def test_a_steering_inbox_is_drained_into_a_steering_runs_next_step(tmp_path: Path) -> None:
    (tmp_path / "inbox" / "server").mkdir(parents=True)
    (tmp_path / "inbox" / "server" / "index.py").write_text(INBOX)
    entry = PluginEntry("inbox", tmp_path / "inbox", "server/index.py", (("PreStep", "normal"),), "builtin")
    result = load_entries([entry], generation=1)
    assert result.errors == {}
    table = HandlerTable(result.loaded[0].registrar.hooks, {"inbox": "builtin"})
    step = {"step": 1, "stepsRemaining": 5, "maxSteps": 5, "toolNames": [], "toolChoice": "auto"}
    execution = ExecutionContext(session_id="s", turn_id="t1", locale="en", active_plugin_ids=("inbox",), plugin_id="inbox",
                                 runtime_id="narrator")
    skipped = await dispatch(table, "PreStep", execution, {**step, "steering": False})
    assert "interjections" not in skipped.payload, "a run without steering: the inbox is not drained"
    drained = await dispatch(table, "PreStep", execution, {**step, "steering": True})
    assert drained.payload["interjections"] == ["Psst!", "and the lamp?"]
    again = await dispatch(table, "PreStep", execution, {**step, "steering": True})
    assert "interjections" not in again.payload

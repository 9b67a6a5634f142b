"""The two example plugins of docs/event-hooks.md, loaded from plugins/ by the real loader and
run by the real dispatcher and event-key bus: example-hookspecs (its deniedTools policy, house
rules, pause) and example-event-keys (bootstrap notes, message and gateway handlers)."""

from __future__ import annotations

import json

import pytest

from services.hooks.dispatcher import ExecutionContext, HandlerTable, dispatch
from services.hooks.event_keys import Audience, EventKeyBus, EventKeyTable
from services.hooks.in_process import load_entries
from services.hooks.loaded_hookspecs import tell_tool_refused
from services.hooks.plugin_entries import PluginEntry
from shared.settings import REPO_ROOT

pytestmark = pytest.mark.asyncio(loop_scope="session")
HOOKSPECS, EVENT_KEYS = "example-hookspecs", "example-event-keys"
DECLARED = ("PreLLMCall", "PostLLMResponse", "PreToolUse", "PostToolUse", "PostContextAssembly", "PostRuntime")


@pytest.fixture(scope="module")
def loaded():
    result = load_entries([
        PluginEntry(HOOKSPECS, REPO_ROOT / "plugins" / HOOKSPECS, "server/index.py", tuple((e, "normal") for e in DECLARED), "builtin"),
        PluginEntry(EVENT_KEYS, REPO_ROOT / "plugins" / EVENT_KEYS, "server/index.py", (), "builtin"),
    ], generation=7)
    assert result.errors == {}
    return {plugin.entry.plugin_id: plugin for plugin in result.loaded}


def execution(denied: str = "") -> ExecutionContext:
    return ExecutionContext(session_id="s", turn_id="t", locale="en", active_plugin_ids=(HOOKSPECS,), plugin_id="narrator",
                            runtime_id="narrator", plugin_settings={HOOKSPECS: {"deniedTools": denied}})


def table(loaded) -> HandlerTable:
    return HandlerTable(loaded[HOOKSPECS].registrar.hooks, {HOOKSPECS: "builtin"})


def tool_call(name: str, call_id: str = "c1") -> dict:
    return {"toolCall": {"id": call_id, "name": name, "arguments": json.dumps({"note": "x"})}}


async def test_the_tool_policy_refuses_the_tools_its_setting_names(loaded) -> None:
    hooks = table(loaded)
    refused = await dispatch(hooks, "PreToolUse", execution("save-note, roll"), tool_call("roll"))
    assert refused.aborted and refused.reason == "roll is not allowed at this table"
    # The hooks service then tells hookspec plugins of the refusal; its own deny was told already (skipped).
    await tell_tool_refused(list(loaded.values()), hooks, execution("save-note, roll"), refused.payload, refused.reason)
    allowed = await dispatch(hooks, "PreToolUse", execution("save-note, roll"), tool_call("lookup", "c2"))
    assert not allowed.aborted
    # No setting (the default ""): nothing is refused.
    assert not (await dispatch(hooks, "PreToolUse", execution(), tool_call("roll", "c3"))).aborted
    # Only whole names count.
    assert not (await dispatch(hooks, "PreToolUse", execution("rol"), tool_call("roll", "c4"))).aborted


async def test_house_rules_join_the_system_prompt_and_a_pause_finishes_the_call(loaded) -> None:
    hooks = table(loaded)
    assembled = await dispatch(hooks, "PostContextAssembly", execution(),
                               {"systemPrompt": "Preamble.", "messages": [{"role": "user", "content": "I wave."}]})
    assert assembled.payload["systemPrompt"].startswith("Preamble.\n\nHouse rules: keep each reply under 150 words")
    paused = await dispatch(hooks, "PreLLMCall", execution(), {"messages": [{"role": "user", "content": "(pause)"}],
                                                               "model": "story", "tools": ["roll"], "stream": True})
    # The call is answered (replace.response): the scheduler does not ask the model.
    story = json.loads(paused.payload["response"]["content"])
    assert story["segments"][0]["text"] == "The story holds its breath and waits for you." and story["yield"] == "user"
    # Any other message goes to the model untouched.
    talk = await dispatch(hooks, "PreLLMCall", execution(), {"messages": [{"role": "user", "content": "I talk."}], "model": "story",
                                                             "tools": [], "stream": True})
    assert talk.payload["stream"] is True


async def test_the_event_key_example_adds_its_notes_and_handles_its_keys(loaded) -> None:
    registrar = loaded[EVENT_KEYS].registrar
    assert sorted(r.key for r in registrar.event_handlers) == [
        "agent:bootstrap", "command:new", "gateway:shutdown", "gateway:startup", "message"]
    keys = EventKeyTable(registrar.event_handlers, {EVENT_KEYS: "builtin"})
    bus = EventKeyBus()
    session = Audience("s", frozenset({EVENT_KEYS}), frozenset())
    files = [{"name": "PLUGIN.md", "path": "/p/PLUGIN.md", "missing": False, "content": "prompt"}]
    booted = await bus.emit(keys, "agent:bootstrap", session, {"workspaceDir": "/p", "bootstrapFiles": files})
    notes = booted.context["bootstrapFiles"][1]
    assert notes["name"] == "STORY-NOTES.md" and notes["path"] == str(REPO_ROOT / "plugins" / EVENT_KEYS / "STORY-NOTES.md")
    assert notes["missing"] is False and notes["content"].startswith("Story notes from the example-event-keys plugin")
    emissions = [
        await bus.emit(keys, "command:new", session, {"sessionEntry": {"id": "s", "locale": "en"}, "commandSource": "gateway:sessions.create"}),
        await bus.emit(keys, "message:received", session, {"from": "main", "content": "hi", "channelId": "grpc"}),
        await bus.emit(keys, "message:sent", session, {"to": "s", "content": "story", "success": False, "channelId": "grpc",
                                                       "error": "the client went away"}),
        await bus.emit(keys, "gateway:startup", Audience(), {"cfg": {}, "deps": {"hooks": "x"}, "workspaceDir": "/d"}),
        await bus.emit(keys, "gateway:shutdown", Audience(), {"reason": "shutdown", "restartExpectedMs": None}, budget_s=5),
    ]
    assert [(e.handler_count, [t.status for t in e.trace]) for e in emissions] == [(1, ["ok"])] * 5
    # Not subscribed: the session family's other keys reach no handler of it.
    assert (await bus.emit(keys, "session:patch", session, {})).handler_count == 0

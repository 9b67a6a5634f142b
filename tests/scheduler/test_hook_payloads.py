"""The hook payload records (services/scheduler/hooks/payloads): one per event of shared/hook_events.py, each giving
exactly the wire dict the contract documents (docs/hooks.md), and the replies read from what the handlers returned."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from covel.common.v1 import common_pb2
from covel.store.v1 import store_pb2
from services.scheduler.hooks.bus import HookOutcome
from services.scheduler.hooks.payloads import (
    PAYLOAD_RECORDS,
    HookPayload,
    PostCompaction,
    PostContextAssembly,
    PostLLMResponse,
    PostRuntime,
    PostStateCommit,
    PostToolUse,
    PreCompaction,
    PreLLMCall,
    PreRuntime,
    PreSchedule,
    PreStateCommit,
    PreStep,
    PreToolUse,
    SessionEnd,
    SessionStart,
    TriggeredRuntime,
    TurnStart,
    TurnStop,
)
from services.scheduler.hooks.replies import (
    PostContextAssemblyReply,
    PostLLMResponseReply,
    PreStateCommitReply,
    PreStepReply,
    PreToolUseReply,
)
from shared.hook_events import EVENTS_BY_NAME, HOOK_EVENTS
from shared.structs import to_struct

HOOKS_DOC = Path(__file__).resolve().parents[2] / "docs" / "hooks.md"
CALL = {"id": "c1", "name": "roll", "arguments": "{}"}
MESSAGES = [{"role": "user", "content": "look"}]
SEGMENTS = [{"pluginId": "narrator", "id": "style"}]
PROPOSAL = store_pb2.Proposal(id="p1", type="plugin.data.set", payload=to_struct({"value": 2}))
RESULT = {"pluginId": "dice", "runtimeId": "dice/roller", "status": "success"}
PREVIOUS = {"status": "continue", "prompt": "look", "output": "", "messages": MESSAGES}
ACTION = common_pb2.PlayerAction(seat_id="main", kind="say", text="hello", source="player")
MANIFEST = {"id": "dice/roller", "pluginId": "dice", "type": "function", "schedule": {"stage": "pre-turn"}}

# Per event: records built as the scheduler builds them, with the exact wire dict each gives (the keys and values
# plugins read), the full one first; then a record leaving out what is only sometimes there.
SAMPLES: dict[str, list[tuple[HookPayload, dict[str, Any]]]] = {
    "SessionStart": [(SessionStart("s1", "saltmere"), {"sessionId": "s1", "worldId": "saltmere"}),
                     (SessionStart("s1"), {"sessionId": "s1"})],
    "TurnStart": [(TurnStart("hello", [ACTION], ["narrator/story"]), {
        "playerMessage": "hello", "actions": [{"seatId": "main", "kind": "say", "text": "hello", "source": "player"}],
        "activeRuntimes": ["narrator/story"]})],
    "PreCompaction": [(PreCompaction(12), {"messageCount": 12})],
    "PostCompaction": [(PostCompaction("sum-1"), {"compacted": True, "summaryId": "sum-1"}),
                       (PostCompaction(), {"compacted": False})],
    "PreSchedule": [(PreSchedule([TriggeredRuntime("dice/roller", "pre", "system", "dice", MANIFEST)]),
                     {"triggered": [{**MANIFEST, "name": "dice/roller", "stage": "pre", "visibility": "system", "pluginId": "dice"}]})],
    "PreRuntime": [(PreRuntime("dice/roller", "pre", "hello", MANIFEST, [{"seatId": "main", "kind": "say"}], "manual", {"n": 1}),
                    {"manifest": {**MANIFEST, "runtimeId": "dice/roller", "stage": "pre"},
                     "input": {"playerMessage": "hello", "playerActions": [{"seatId": "main", "kind": "say"}], "origin": "manual",
                               "activation": {"n": 1}}})],
    "PostContextAssembly": [
        (PostContextAssembly("sys", MESSAGES, True, "Tell it.", SEGMENTS, "wren", {"check": {"value": 3}},
                             [{"id": "wren", "name": "Wren", "type": "player", "aliases": ["W"], "version": 2}]),
         {"systemPrompt": "sys", "messages": MESSAGES, "outputKind": "story", "promptTemplate": "Tell it.", "promptSegments": SEGMENTS,
          "currentCharacterId": "wren", "inputSlots": {"check": {"value": 3}},
          "characters": [{"id": "wren", "name": "Wren", "type": "player"}]}),
        (PostContextAssembly("sys", MESSAGES, False, "", []),
         {"systemPrompt": "sys", "messages": MESSAGES, "outputKind": "system", "promptTemplate": "", "promptSegments": []})],
    "PreStep": [
        (PreStep(2, 5, 8, ["roll"], {"name": "roll"}, True, PREVIOUS),
         {"step": 2, "stepsRemaining": 5, "maxSteps": 8, "toolNames": ["roll"], "toolChoice": {"name": "roll"}, "steering": True,
          "previous": PREVIOUS}),
        (PreStep(1, 8, 8, [], "auto", False),
         {"step": 1, "stepsRemaining": 8, "maxSteps": 8, "toolNames": [], "toolChoice": "auto", "steering": False})],
    "PreLLMCall": [(PreLLMCall(MESSAGES, "story", ["roll"], True, SEGMENTS),
                    {"messages": MESSAGES, "model": "story", "tools": ["roll"], "stream": True, "promptSegments": SEGMENTS})],
    "PostLLMResponse": [(PostLLMResponse("text", "stop", [CALL], 10, 4, MESSAGES), {
        "response": {"content": "text", "finishReason": "stop", "toolCalls": [CALL],
                     "usage": {"promptTokens": 10, "completionTokens": 4, "totalTokens": 14}},
        "messages": MESSAGES})],
    "PostRuntime": [(PostRuntime(RESULT, resumed=True), {"result": RESULT, "resumed": True}),
                    (PostRuntime(RESULT), {"result": RESULT})],
    "PreToolUse": [(PreToolUse(CALL), {"toolCall": CALL})],
    "PostToolUse": [(PostToolUse(CALL, '{"ok": true}', True), {"toolCall": CALL, "result": {"result": '{"ok": true}', "success": True}})],
    "PreStateCommit": [(PreStateCommit(PROPOSAL), {"proposal": {"id": "p1", "type": "plugin.data.set", "payload": {"value": 2}}})],
    "PostStateCommit": [(PostStateCommit(PROPOSAL), {"proposal": {"id": "p1", "type": "plugin.data.set", "payload": {"value": 2}},
                                                     "result": {"committed": True}})],
    "TurnStop": [(TurnStop([store_pb2.RuntimeResult(runtime_id="dice/roller", plugin_id="dice", status="success",
                                                    output=to_struct({"total": 7}), duration_ms=40),
                            store_pb2.RuntimeResult(runtime_id="dice/luck", plugin_id="dice", status="failed", reason="no luck")], 120),
                  {"runtimeResults": [
                      {"runtimeId": "dice/roller", "pluginId": "dice", "status": "success", "output": {"total": 7}, "durationMs": 40},
                      {"runtimeId": "dice/luck", "pluginId": "dice", "status": "failed", "reason": "no luck", "output": {}, "durationMs": 0}],
                   "durationMs": 120})],
    "SessionEnd": [(SessionEnd("s1", "deleted"), {"sessionId": "s1", "reason": "deleted"})],
}


def _all_subclasses(cls: type) -> list[type]:
    return [sub for direct in cls.__subclasses__() for sub in (direct, *_all_subclasses(direct))]


def test_every_event_has_exactly_one_record() -> None:
    assert [record.event for record in PAYLOAD_RECORDS] == [event.name for event in HOOK_EVENTS]
    records = [cls for cls in _all_subclasses(HookPayload) if cls.__module__.startswith("services.scheduler.hooks.payloads")]
    assert sorted(cls.event for cls in records) == sorted(EVENTS_BY_NAME)
    assert set(SAMPLES) == set(EVENTS_BY_NAME)


@pytest.mark.parametrize("event", list(EVENTS_BY_NAME))
def test_each_record_gives_the_wire_dict_of_its_event(event: str) -> None:
    for record, wire in SAMPLES[event]:
        assert record.event == event
        assert record.wire() == wire
        assert list(record.wire()) == list(wire)  # the keys in the order they were always sent


def _documented_payloads() -> dict[str, tuple[set[str], set[str]]]:
    """Per event whose section of docs/hooks.md gives its payload: (the keys always there, the optional ones `key?`)."""
    sections = re.split(r"^## ", HOOKS_DOC.read_text(encoding="utf-8"), flags=re.MULTILINE)[1:]
    documented = {}
    for section in sections:
        name = section.split("\n", 1)[0].strip()
        found = re.search(r"Payload:\s*`\{(.*?)\}`", section, flags=re.DOTALL)
        if name in EVENTS_BY_NAME and found:
            keys, depth, part = [], 0, ""
            for char in found.group(1) + ",":
                depth += {"{": 1, "}": -1}.get(char, 0)
                if char == "," and depth == 0:
                    keys.append(part.split(":")[0].strip())
                    part = ""
                else:
                    part += char
            documented[name] = ({key for key in keys if not key.endswith("?")}, {key[:-1] for key in keys if key.endswith("?")})
    return documented


def test_the_wire_keys_are_the_documented_ones() -> None:
    documented = _documented_payloads()
    assert len(documented) >= 12  # the sections that give a payload
    for event, (required, optional) in documented.items():
        for record, _ in SAMPLES[event]:
            keys = set(record.wire())
            assert required <= keys <= required | optional, (event, keys)


def _outcome(record: HookPayload, replace: dict[str, Any]) -> HookOutcome:
    sent = record.wire()
    return HookOutcome(False, "", {**sent, **replace}, sent=sent)


def test_replies_read_what_the_handlers_changed() -> None:
    step = PreStep(2, 5, 8, ["roll"], "auto", True, PREVIOUS)
    reply = PreStepReply.of(_outcome(step, {"previous": {"status": "other"}, "stepsRemaining": 2, "interjections": ["hi"]}))
    assert reply.replace == {"stepsRemaining": 2, "interjections": ["hi"]} and reply.interjections == ["hi"]
    assert PreStepReply.of(_outcome(step, {})).replace == {}
    assert PreToolUseReply.of(_outcome(PreToolUse(CALL), {})) == PreToolUseReply({}, None)
    answered = PreToolUseReply.of(_outcome(PreToolUse(CALL), {"result": None}))
    assert answered.answer == '{"ok": true, "data": null}' and answered.replace == {"result": None}
    review = PostLLMResponse("draft", "stop", [], 1, 1, [])
    assert PostLLMResponseReply.of(_outcome(review, {"correction": "  "})) == PostLLMResponseReply(None, "draft")
    assert PostLLMResponseReply.of(_outcome(review, {"correction": "shorter", "response": {"content": 3}})) == \
        PostLLMResponseReply("shorter", None)
    assembled = PostContextAssembly("sys", MESSAGES, True, "", [])
    assert PostContextAssemblyReply.of(_outcome(assembled, {"messages": "no"})) == PostContextAssemblyReply("sys", None)
    assert PreStateCommitReply.of(_outcome(PreStateCommit(PROPOSAL), {"proposal": {"payload": {"value": 3}}})).payload == {"value": 3}
    assert PreStateCommitReply.of(_outcome(PreStateCommit(PROPOSAL), {})).payload == {"value": 2}

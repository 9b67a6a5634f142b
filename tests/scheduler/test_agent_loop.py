"""The agent loop's rules, driven in process with a scripted fake gateway and fake hooks."""

from __future__ import annotations

import json

import pytest

from services.scheduler import agent_runtime
from services.scheduler.agent_runtime import SubagentCall, run_agent, split_effects
from services.scheduler.agent_tools import KernelTools, add_runtime_done
from services.scheduler.loop_profile import loop_settings
from tests.scheduler.agent_harness import FakeGateway, FakeHooks, no_stream, reply, runtime, scope

SCHEMA = [("schema", {"type": "object", "required": ["mood"], "properties": {"mood": {"type": "string", "enum": ["calm", "tense"]}}})]


async def run(rt, gateway, hooks=None, **kwargs):
    return await run_agent(runtime=rt, scope=scope(), history=[], player_message="Look around.", gateway=gateway,
                           hooks=hooks or FakeHooks(), on_narrative=no_stream, history_max_turns=5, **kwargs)


def test_profiles_give_the_spec_table_and_overrides():
    story = loop_settings({}, story=True)
    assert (story.profile, story.stream, story.steering, story.truncation, story.fallback) == (
        "story", True, True, "accept", "answer-without-tools")
    system = loop_settings({}, story=False)
    assert (system.profile, system.stream, system.truncation, system.fallback) == ("system", False, "reject", "fail")
    actor = loop_settings({}, story=False, subagent=True)
    assert (actor.profile, actor.fallback) == ("actor", "answer-without-tools")
    overridden = loop_settings({"profile": "story", "stream": False, "corrections": {"review": 0}}, story=True)
    # truncation accept only holds for text the player watched stream.
    assert (overridden.stream, overridden.truncation, overridden.corrections["review"]) == (False, "reject", 0)
    assert overridden.corrections["toolUse"] == 1
    # A subagent budget only tightens.
    tight = loop_settings({"maxSteps": 4, "timeoutMs": 20_000}, story=False, subagent=True, budget={"maxSteps": 9, "timeoutMs": 5000})
    assert (tight.max_steps, tight.timeout_ms) == (4, 5000)
    # The reserve used is at most half the time limit.
    assert loop_settings({"timeoutMs": 10_000, "finalizer": {"deadlineReserveMs": 8000}}, story=False).deadline_reserve_s == 5.0


async def test_system_agent_output_is_its_json_checked_against_the_schema():
    gateway = FakeGateway([reply(json.dumps({"mood": "calm", "statePatches": [{"x": 1}]}))])
    outcome = await run(runtime(), gateway, output_schemas=SCHEMA)
    assert outcome.status == "success"
    # A model-written effect field does nothing.
    assert outcome.output == {"mood": "calm"}
    # The schema goes to the model as the response format.
    assert gateway.requests[0].response_format.name


async def test_invalid_system_output_gets_one_tool_less_repair_then_fails():
    gateway = FakeGateway([reply('{"mood": "furious"}'), reply("```json\n{\"mood\": \"tense\"}\n```")])
    outcome = await run(runtime(), gateway, output_schemas=SCHEMA)
    assert outcome.status == "success" and outcome.output == {"mood": "tense"}
    repair = gateway.requests[1].messages[-1].content
    assert "does not fit" in repair and "/mood" in repair and not gateway.requests[1].tools

    gateway = FakeGateway([reply("not json"), reply('{"mood": 3}')])
    outcome = await run(runtime(), gateway, output_schemas=SCHEMA)
    assert outcome.status == "failed" and outcome.reason.startswith("invalid-output") and "/mood" in outcome.reason

    # outputRepair: 0 turns the repair off.
    gateway = FakeGateway([reply("not json")])
    outcome = await run(runtime(manifest={"agent": {"loop": {"corrections": {"outputRepair": 0}}}}), gateway, output_schemas=SCHEMA)
    assert outcome.status == "failed" and "not JSON" in outcome.reason and len(gateway.requests) == 1


def test_split_effects_keeps_events_without_topic():
    assert split_effects({"a": 1, "ui": [], "events": [{"topic": "x"}, {"kind": "fight"}]}, "r") == {
        "a": 1, "events": [{"kind": "fight"}]}


async def test_deadline_reserve_turns_tools_off_and_asks_for_the_answer(monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(agent_runtime.time, "monotonic", lambda: clock[0])
    hooks = FakeHooks(plugin_tools={"look": ({"type": "object"}, True)})

    def advance(request):
        clock[0] += 6.5  # each model call takes 6.5 s of a 12 s budget

    gateway = FakeGateway([reply("", ("look", {})), reply("All quiet.")], before_answer=advance)
    manifest = {"agent": {"tools": {"plugin": ["look"]}, "loop": {"timeoutMs": 12_000, "finalizer": {"deadlineReserveMs": 6000}}}}
    outcome = await run(runtime(manifest=manifest), gateway, hooks)
    assert outcome.status == "success" and outcome.output == {"content": "All quiet."}
    assert outcome.stop_reason == "deadline" and outcome.finalizer
    assert not gateway.requests[1].tools
    # The finaliser request has no PreStep of its own.
    assert [e for e, _ in hooks.dispatched].count("PreStep") == 1


async def test_deadline_reserve_waits_while_a_completion_tool_is_still_required(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(agent_runtime.time, "monotonic", lambda: clock[0])
    hooks = FakeHooks(plugin_tools={"look": ({"type": "object"}, True), "finish": ({"type": "object"}, False)})
    gateway = FakeGateway([reply("", ("look", {})), reply("", ("finish", {}))], before_answer=lambda r: clock.__setitem__(0, clock[0] + 6.5))
    manifest = {"agent": {"finishWith": "finish", "tools": {"plugin": ["look", "finish"]},
                          "loop": {"timeoutMs": 14_000, "finalizer": {"deadlineReserveMs": 7000}}}}
    outcome = await run(runtime(manifest=manifest), gateway, hooks)
    assert outcome.status == "success" and outcome.stop_reason == "tool-finished" and not outcome.finalizer


async def test_steering_merges_queued_interjections_before_each_step():
    queued = [["wait, is that a door?"], []]
    gateway = FakeGateway([reply('{"segments": [{"kind": "narration", "text": "A door creaks."}]}')])
    manifest = {"io": {"output": {"contract": "narrative-engine@2"}}}
    outcome = await run(runtime("narrator", "story", manifest), gateway, interjections=lambda: queued.pop(0) if queued else [])
    assert outcome.status == "success"
    sent = [m.content for m in gateway.requests[0].messages]
    assert sent[-1] == "(The player interjects) wait, is that a door?"

    # A system runtime (no steering) never reads them.
    calls = []
    gateway = FakeGateway([reply("done")])
    await run(runtime(), gateway, interjections=lambda: calls.append(1) or ["ignored"])
    assert all("interjects" not in m.content for m in gateway.requests[0].messages)


async def test_a_subagent_gets_its_brief_only_read_only_tools_and_no_context_hook():
    hooks = FakeHooks(plugin_tools={"peek": ({"type": "object"}, True), "write": ({"type": "object"}, False)})
    tools = KernelTools()
    add_runtime_done(tools)  # not read-only: taken away
    gateway = FakeGateway([reply('{"mood": "calm"}')])
    manifest = {"agent": {"tools": {"plugin": ["peek", "write"]}}}
    outcome = await run_agent(
        runtime=runtime("probe/gate", manifest=manifest), scope=scope(), history=[], player_message="", gateway=gateway,
        hooks=hooks, on_narrative=no_stream, history_max_turns=0, manifest=manifest, kernel_tools=tools,
        output_schemas=SCHEMA, subagent=SubagentCall("A stranger asks to pass.", {"maxSteps": 2}))
    assert outcome.status == "success" and outcome.output == {"mood": "calm"}
    request = gateway.requests[0]
    assert [t.name for t in request.tools] == ["peek"]
    assert [m.role for m in request.messages] == ["system", "user"] and request.messages[1].content == "A stranger asks to pass."
    assert "PostContextAssembly" not in [e for e, _ in hooks.dispatched]
    assert ("PreStep", "probe/gate") in hooks.dispatched


@pytest.mark.parametrize("truncation, expected", [("accept", "success"), ("reject", "failed")])
async def test_truncation_follows_the_profile(truncation, expected):
    story = '{"segments": [{"kind": "narration", "text": "The rain beg'
    gateway = FakeGateway([reply(story, finish="length"), reply(story, finish="length")])
    manifest = {"io": {"output": {"contract": "narrative-engine@2"}}, "agent": {"loop": {"truncation": truncation}}}
    outcome = await run(runtime("narrator", "story", manifest), gateway)
    assert outcome.status == expected


async def test_tool_results_reach_the_model_without_bookkeeping_fields():
    record = {"id": "0b7c2a52-4b5e-4a57-9d1c-8c7d6f1c2a10", "name": "Lamp", "createdAt": "2026-01-02T03:04:05Z"}
    hooks = FakeHooks(plugin_tools={"look": ({"type": "object"}, True)}, tool_results={"look": {"ok": True, "data": record}})
    gateway = FakeGateway([reply("", ("look", {})), reply("A lamp.")])
    outcome = await run(runtime(manifest={"agent": {"tools": {"plugin": ["look"]}}}), gateway, hooks)
    assert outcome.status == "success"
    tool_message = [m for m in gateway.requests[1].messages if m.role == "tool"][0]
    assert json.loads(tool_message.content) == {"ok": True, "data": {"name": "Lamp"}}

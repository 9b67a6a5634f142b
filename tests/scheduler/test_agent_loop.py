"""The agent loop's rules, driven in process with a scripted fake gateway and fake hooks."""

from __future__ import annotations

import json

import pytest

from services.scheduler.agent import answers
from services.scheduler.agent import loop as agent_runtime
from services.scheduler.agent.answers import split_effects
from services.scheduler.agent.loop import run_agent
from services.scheduler.agent.loop_profile import loop_settings
from services.scheduler.execution.kernel_tools import KernelTools, add_runtime_done
from services.scheduler.execution.outcome import SubagentCall
from services.scheduler.execution.player_effects import ShownInvalid
from services.scheduler.hooks.bus import HookOutcome
from shared.manifest.runtime import Loop
from tests.scheduler.agent_harness import FakeGateway, FakeHooks, no_stream, reply, runtime, scope
from tests.scheduler.compiled import compiled_manifest


def compiled_loop(written: dict | None = None, visibility: str = "system", subagent_only: bool = False) -> Loop:
    """agent.loop as the registry compiles it from what an author wrote."""
    author: dict = {"agent": {"loop": written}} if written else {}
    if subagent_only:
        author["schedule"] = {"subagentOnly": True}
    return compiled_manifest(author, visibility=visibility).agent_part.loop


SCHEMA = [("schema", {"type": "object", "required": ["mood"], "properties": {"mood": {"type": "string", "enum": ["calm", "tense"]}}})]


async def run(rt, gateway, hooks=None, **kwargs):
    return await run_agent(runtime=rt, scope=scope(), history=[], player_message="Look around.", gateway=gateway,
                           hooks=hooks or FakeHooks(), on_narrative=no_stream, history_max_turns=5, **kwargs)


def test_profiles_give_the_spec_table_and_overrides():
    story = loop_settings(compiled_loop(visibility="story"), story=True)
    assert (story.profile, story.stream, story.steering, story.truncation, story.fallback) == (
        "story", True, True, "accept", "answer-without-tools")
    system = loop_settings(compiled_loop(), story=False)
    assert (system.profile, system.stream, system.truncation, system.fallback) == ("system", False, "reject", "fail")
    actor = loop_settings(compiled_loop(subagent_only=True), story=False, subagent=True)
    assert (actor.profile, actor.fallback) == ("actor", "answer-without-tools")
    # stream: false with the story profile's truncation: accept, which the registry refuses to compile.
    written = compiled_loop({"profile": "story", "corrections": {"review": 0}}, visibility="story").model_copy(update={"stream": False})
    overridden = loop_settings(written, story=True)
    # truncation accept only holds for text the player watched stream.
    assert (overridden.stream, overridden.truncation, overridden.corrections["review"]) == (False, "reject", 0)
    assert overridden.corrections["toolUse"] == 1
    # A subagent budget only tightens.
    tight = loop_settings(compiled_loop({"maxSteps": 4, "timeoutMs": 20_000}, subagent_only=True), story=False, subagent=True,
                          budget={"maxSteps": 9, "timeoutMs": 5000})
    assert (tight.max_steps, tight.timeout_ms) == (4, 5000)
    # The reserve used is at most half the time limit.
    assert loop_settings(compiled_loop({"timeoutMs": 10_000, "finalizer": {"deadlineReserveMs": 8000}}), story=False).deadline_reserve_s == 5.0


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


async def test_pre_game_done_in_the_final_answer_is_the_completion_signal_not_output():
    gateway = FakeGateway([reply(json.dumps({"mood": "calm", "preGameDone": True, "interactions": [{"kind": "confirm"}]}))])
    outcome = await run(runtime(), gateway, output_schemas=SCHEMA)
    assert outcome.status == "success" and outcome.output == {"mood": "calm"} and outcome.completion == "done"
    assert outcome.shown == {}, "a model cannot write interactions: only tools make them"
    gateway = FakeGateway([reply(json.dumps({"mood": "tense", "completion": "pending"}))])
    outcome = await run(runtime(), gateway, output_schemas=SCHEMA)
    assert (outcome.output, outcome.completion) == ({"mood": "tense"}, "pending")


def test_a_finishing_tools_effects_count_and_are_checked():
    form = {"kind": "form", "schema": {"type": "object", "properties": {"name": {"type": "string"}}}}
    business, shown, completion = answers.completion_split(
        {"saved": True, "interactions": [form], "notifications": [{"text": "Saved."}], "preGameDone": True}, from_tool=True)
    assert (business, completion) == ({"saved": True}, "done") and shown == {"interactions": [form], "notifications": [{"text": "Saved."}]}
    with pytest.raises(ShownInvalid, match=r"notifications\[0\].text must be a non-empty string"):
        answers.completion_split({"notifications": [{"text": ""}]}, from_tool=True)
    with pytest.raises(ShownInvalid, match="options must be 1-20 objects"):
        answers.completion_split({"interactions": [{"kind": "choice", "prompt": "Which?"}]}, from_tool=True)


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
    provider = runtime("probe/gate", manifest={"schedule": {"subagentOnly": True}, "agent": {"tools": {"plugin": ["peek", "write"]}}})
    outcome = await run_agent(
        runtime=provider, scope=scope(), history=[], player_message="", gateway=gateway,
        hooks=hooks, on_narrative=no_stream, history_max_turns=0, manifest=provider.manifest, kernel_tools=tools,
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


# -- completion conditions (spec: 完成条件) -------------------------------------------------------------

def _tool_choices(gateway):
    return [request.tool_choice for request in gateway.requests]


async def test_explicit_completion_gets_one_forced_correction_after_a_business_call_then_prose():
    hooks = FakeHooks(plugin_tools={"note": ({"type": "object"}, False)})
    manifest = {"agent": {"tools": {"plugin": ["note"]}, "completion": {"require": "explicit"}}}
    gateway = FakeGateway([reply("", ("note", {})), reply("All noted."), reply("", ("runtime-done", {}))])
    outcome = await run(runtime(manifest=manifest), gateway, hooks)
    assert outcome.status == "success", outcome.reason
    correction = gateway.requests[2]
    assert correction.messages[-1].content == "You must finish by calling runtime-done."
    assert correction.tool_choice == "required" and _tool_choices(gateway)[:2] == ["auto", "auto"]

    # Prose again after the correction: the run fails.
    gateway = FakeGateway([reply("", ("note", {})), reply("All noted."), reply("Still noted.")])
    outcome = await run(runtime(manifest=manifest), gateway, hooks)
    assert outcome.status == "failed" and "runtime-done" in outcome.reason and len(gateway.requests) == 3


async def test_finish_with_answering_prose_twice_fails_after_one_correction():
    hooks = FakeHooks(plugin_tools={"save": ({"type": "object"}, False)})
    manifest = {"agent": {"tools": {"plugin": ["save"]}, "finishWith": "save"}}
    gateway = FakeGateway([reply("I would save it."), reply("Saved, I promise.")])
    outcome = await run(runtime(manifest=manifest), gateway, hooks)
    assert outcome.status == "failed" and outcome.reason == "completion: the agent finished without a successful call of save"
    assert _tool_choices(gateway) == ["required", "required"] and hooks.tool_calls == []
    assert gateway.requests[1].messages[-1].content == "You must finish by calling save."


async def test_a_correction_keeps_a_named_tool_choice():
    """Divergence 1 (issue 40): the request after a correction still names the manifest's tool, not `required`."""
    hooks = FakeHooks(plugin_tools={"save": ({"type": "object"}, False), "look": ({"type": "object"}, True)})
    manifest = {"agent": {"tools": {"plugin": ["save", "look"]}, "toolChoice": {"name": "save"}, "completion": {"require": "tool-use"}}}
    gateway = FakeGateway([reply("I would save it."), reply("", ("save", {})), reply("Saved.")])
    outcome = await run(runtime(manifest=manifest), gateway, hooks)
    assert outcome.status == "success", outcome.reason
    assert _tool_choices(gateway)[:2] == ["save", "save"] and gateway.requests[1].messages[-1].content.startswith("You must")


async def test_tool_use_without_after_tools_ends_with_the_models_reviewed_answer():
    hooks = FakeHooks(plugin_tools={"draft": ({"type": "object"}, False)},
                      tool_results={"draft": {"ok": True, "data": {"mood": "tense", "draft": True}}})
    manifest = {"agent": {"tools": {"plugin": ["draft"]}, "completion": {"require": "tool-use"}}}
    gateway = FakeGateway([reply("", ("draft", {})), reply('{"mood": "calm"}')])
    outcome = await run(runtime(manifest=manifest), gateway, hooks, output_schemas=SCHEMA)
    # The model read the tool's draft and answered: its answer, not the tool's data, is the output.
    assert outcome.status == "success" and outcome.output == {"mood": "calm"} and outcome.stop_reason == "completed"
    assert len(gateway.requests) == 2

    # No business call before the prose answer: a forced correction, then failure.
    gateway = FakeGateway([reply('{"mood": "calm"}'), reply('{"mood": "calm"}')])
    outcome = await run(runtime(manifest=manifest), gateway, hooks, output_schemas=SCHEMA)
    assert outcome.status == "failed" and outcome.reason.startswith("completion:") and _tool_choices(gateway)[1] == "required"


async def test_after_tools_end_the_loop_on_a_listed_tool_with_its_data():
    hooks = FakeHooks(plugin_tools={"look": ({"type": "object"}, True), "commit": ({"type": "object"}, False)},
                      tool_results={"commit": {"ok": True, "data": {"mood": "tense"}}})
    manifest = {"agent": {"tools": {"plugin": ["look", "commit"]},
                          "completion": {"require": "tool-use", "afterTools": ["commit"]}}}
    gateway = FakeGateway([reply("", ("look", {})), reply("", ("commit", {}))])
    outcome = await run(runtime(manifest=manifest), gateway, hooks, output_schemas=SCHEMA)
    # Ended on commit without asking the model again; look alone did not complete it.
    assert outcome.status == "success" and outcome.output == {"mood": "tense"} and outcome.stop_reason == "tool-finished"
    assert len(gateway.requests) == 2 and _tool_choices(gateway) == ["auto", "auto"]


async def test_tool_choice_name_reaches_every_step():
    hooks = FakeHooks(plugin_tools={"look": ({"type": "object"}, True), "other": ({"type": "object"}, True)})
    manifest = {"agent": {"tools": {"plugin": ["look", "other"]}, "toolChoice": {"name": "look"}}}
    gateway = FakeGateway([reply("", ("look", {})), reply("Seen.")])
    outcome = await run(runtime(manifest=manifest), gateway, hooks)
    assert outcome.status == "success" and _tool_choices(gateway) == ["look", "look"]


async def test_a_declared_tool_nobody_registered_fails_the_run():
    hooks = FakeHooks(plugin_tools={"look": ({"type": "object"}, True)})
    manifest = {"agent": {"tools": {"plugin": ["look", "ghost"]}}}
    gateway = FakeGateway([])
    outcome = await run(runtime(manifest=manifest), gateway, hooks)
    assert outcome.status == "failed" and outcome.reason.startswith("tool-not-registered") and "ghost" in outcome.reason
    assert gateway.requests == []


# -- output repair, loop detection, steering ------------------------------------------------------------

async def test_output_repair_does_not_resend_the_old_draft():
    gateway = FakeGateway([reply('{"mood": "furious"}'), reply('{"mood": "calm"}')])
    outcome = await run(runtime(), gateway, output_schemas=SCHEMA)
    assert outcome.status == "success"
    repair = gateway.requests[1]
    assert [m.role for m in repair.messages] == ["system", "user", "user"]
    assert all("furious" not in m.content or m.role == "user" and "does not fit" in m.content for m in repair.messages)
    assert not any(m.role == "assistant" for m in repair.messages)


async def test_loop_detection_falls_back_to_an_answer_without_tools():
    hooks = FakeHooks(plugin_tools={"look": ({"type": "object"}, True)})
    manifest = {"agent": {"tools": {"plugin": ["look"]}, "loop": {"maxSteps": 12, "fallback": "answer-without-tools"}}}
    same = reply("", ("look", {"at": "door"}))
    gateway = FakeGateway([same] * 6 + [reply("The door stays shut.")])
    outcome = await run(runtime(manifest=manifest), gateway, hooks)
    assert outcome.status == "success" and outcome.output == {"content": "The door stays shut."}
    # Three repeats: the perturbation; three more: tools off (not the max-steps finalizer).
    assert not outcome.finalizer and len(gateway.requests) == 7
    assert "same tool call several times" in gateway.requests[3].messages[-1].content
    assert [bool(r.tools) for r in gateway.requests] == [True] * 6 + [False]
    assert len(hooks.tool_calls) == 6


STORY_MANIFEST = {"io": {"output": {"contract": "narrative-engine@2"}}}


def _story(text: str) -> str:
    return json.dumps({"segments": [{"kind": "narration", "text": text}]})


async def test_steering_merges_interjections_that_arrive_while_the_story_is_written():
    queued = [[], ["Wait, I draw my sword!"]]
    pieces = []

    async def record(piece):
        pieces.append(piece)

    gateway = FakeGateway([reply(_story("The guard nods.")), reply(_story("You draw; the guard steps back."))])
    outcome = await run_agent(
        runtime=runtime("narrator", "story", STORY_MANIFEST), scope=scope(), history=[], player_message="I wait.",
        gateway=gateway, hooks=FakeHooks(), on_narrative=record, history_max_turns=5,
        interjections=lambda: queued.pop(0) if queued else [])
    assert outcome.status == "success" and outcome.story.narrative_output == "You draw; the guard steps back."
    second = [(m.role, m.content) for m in gateway.requests[1].messages]
    assert second[-2:] == [("assistant", _story("The guard nods.")), ("user", "(The player interjects) Wait, I draw my sword!")]
    assert any(piece.reset for piece in pieces), "the streamed first draft is withdrawn"


async def test_a_repair_after_a_late_interjection_leaves_out_the_earlier_draft():
    queued = [[], ["Look behind you!"]]
    gateway = FakeGateway([reply(_story("The hall is empty.")), reply("prose, not JSON"), reply(_story("A shadow moves."))])
    outcome = await run(runtime("narrator", "story", STORY_MANIFEST), gateway,
                        interjections=lambda: queued.pop(0) if queued else [])
    assert outcome.status == "success" and outcome.story.narrative_output == "A shadow moves."
    repair = [(m.role, m.content) for m in gateway.requests[2].messages]
    assert not any(role == "assistant" for role, _ in repair)
    assert ("user", "(The player interjects) Look behind you!") in repair and "not a valid story" in repair[-1][1]


# -- trace records and logs -----------------------------------------------------------------------------

class AbortingHooks(FakeHooks):
    """PreToolUse aborts calls of `refuse`; PostToolUse of `stop` terminates the loop."""

    async def dispatch(self, record, scope, *, plugin_id="", runtime_id="", timeout_s=60.0):
        event, payload = record.event, record.wire()
        if event == "PreToolUse" and payload["toolCall"]["name"] == "refuse":
            self.dispatched.append((event, runtime_id))
            return HookOutcome(True, "not now", payload, sent=payload)
        return await super().dispatch(record, scope, plugin_id=plugin_id, runtime_id=runtime_id, timeout_s=timeout_s)


def _skips(outcome):
    return [(e.event, e.status, json.loads(e.message)["name"], json.loads(e.message)["skipReason"])
            for e in outcome.trace if e.event.startswith("tool.")]


async def test_skipped_tool_calls_are_traced_with_their_skip_reason():
    hooks = AbortingHooks(plugin_tools={"refuse": ({"type": "object"}, False), "stop": ({"type": "object"}, False),
                                        "later": ({"type": "object"}, False)},
                          handlers={"PostToolUse": lambda p: {"terminate": True} if p["toolCall"]["name"] == "stop" else None})
    manifest = {"agent": {"tools": {"plugin": ["refuse", "stop", "later"]}}}
    gateway = FakeGateway([reply("", ("refuse", {}), ("stop", {}), ("later", {}))])
    outcome = await run(runtime(manifest=manifest), gateway, hooks)
    assert outcome.status == "success" and outcome.stop_reason == "tool-finished"
    assert _skips(outcome) == [("tool.calling", "skipped", "refuse", "hook-aborted"), ("tool.failed", "skipped", "refuse", "hook-aborted"),
                               ("tool.calling", "skipped", "later", "terminated"), ("tool.failed", "skipped", "later", "terminated")]
    assert [c["name"] for c in hooks.tool_calls] == ["stop"]


async def test_what_pre_step_could_not_honour_is_recorded_in_step_completed():
    hooks = FakeHooks(plugin_tools={"look": ({"type": "object"}, True)},
                      handlers={"PreStep": lambda p: {"tools": ["look", "fly"], "stepsRemaining": 99}})
    gateway = FakeGateway([reply("Done.")])
    outcome = await run(runtime(manifest={"agent": {"tools": {"plugin": ["look"]}}}), gateway, hooks)
    assert outcome.status == "success"
    step = [json.loads(e.message) for e in outcome.trace if e.event == "step.completed"]
    assert step[0]["step"] == 1 and "tools: fly" in step[0]["ignored"]
    assert any(item.startswith("stepsRemaining") for item in step[0]["ignored"])


async def test_effect_fields_a_story_or_schemaless_agent_writes_are_logged(monkeypatch):
    warnings = []
    monkeypatch.setattr(answers.log, "warning", lambda event, **fields: warnings.append((event, fields)))
    story = json.dumps({"segments": [{"kind": "narration", "text": "Rain."}], "pluginData": [{"key": "x"}]})
    outcome = await run(runtime("narrator", "story", STORY_MANIFEST), FakeGateway([reply(story)]))
    assert outcome.status == "success" and warnings == [
        ("model-written effect fields ignored", {"runtime_id": "narrator", "fields": ["pluginData"]})]
    warnings.clear()
    outcome = await run(runtime(), FakeGateway([reply('{"ui": [], "note": "hi"}')]))
    assert outcome.status == "success" and warnings[0][1]["fields"] == ["ui"]


# -- context assembly -------------------------------------------------------------------------------------

def _history(turns: int):
    from covel.common.v1 import common_pb2

    messages, seq = [], 0
    for turn in range(1, turns + 1):
        for role, text in (("player", f"player {turn}"), ("story", f"story {turn}")):
            seq += 1
            messages.append(common_pb2.Message(role=role, text=text, seq=seq, turn_id=f"t{turn}"))
    return messages


async def test_history_max_turns_windows_the_conversation():
    gateway = FakeGateway([reply("ok")])
    manifest = {"agent": {"history": {"maxTurns": 2}}}
    await run_agent(runtime=runtime(manifest=manifest), scope=scope(), history=_history(5), player_message="now",
                    gateway=gateway, hooks=FakeHooks(), on_narrative=no_stream, history_max_turns=20)
    sent = [m.content for m in gateway.requests[0].messages[1:]]
    assert sent == ["player 4", "story 4", "player 5", "story 5", "now"]
    # Without a manifest value the service default applies.
    gateway = FakeGateway([reply("ok")])
    await run_agent(runtime=runtime(), scope=scope(), history=_history(5), player_message="now",
                    gateway=gateway, hooks=FakeHooks(), on_narrative=no_stream, history_max_turns=1)
    assert [m.content for m in gateway.requests[0].messages[1:]] == ["player 5", "story 5", "now"]


async def test_the_session_locales_prompt_variant_is_assembled():
    rt = runtime(prompt="Describe the room.")
    rt.prompt_variants["zh"] = "描述房间。"
    zh_scope = scope()
    zh_scope.session.locale = "zh"
    gateway = FakeGateway([reply("好的")])
    await run_agent(runtime=rt, scope=zh_scope, history=[], player_message="看", gateway=gateway, hooks=FakeHooks(),
                    on_narrative=no_stream, history_max_turns=5)
    system = gateway.requests[0].messages[0].content
    assert "描述房间。" in system and "Describe the room." not in system and "Simplified Chinese" in system
    gateway = FakeGateway([reply("ok")])
    await run(rt, gateway)
    assert "Describe the room." in gateway.requests[0].messages[0].content


async def test_a_story_corrected_for_missing_tool_work_withdraws_its_streamed_prose():
    pieces = []

    async def record(piece):
        pieces.append(piece)

    hooks = FakeHooks(plugin_tools={"roll": ({"type": "object"}, False)})
    manifest = {**STORY_MANIFEST, "agent": {"tools": {"plugin": ["roll"]}, "completion": {"require": "tool-use"}}}
    gateway = FakeGateway([reply(_story("You win.")), reply("", ("roll", {})), reply(_story("The dice say you win."))])
    outcome = await run_agent(runtime=runtime("narrator", "story", manifest), scope=scope(), history=[], player_message="Roll.",
                              gateway=gateway, hooks=hooks, on_narrative=record, history_max_turns=5)
    assert outcome.status == "success" and outcome.story.narrative_output == "The dice say you win."
    assert [piece.reset for piece in pieces].count(True) == 1 and gateway.requests[1].tool_choice == "required"


async def test_suspend_saves_the_run_and_resume_hands_the_answer_as_the_calls_result():
    from services.scheduler.agent.suspension import add_suspend_tool
    from services.scheduler.execution.outcome import Resume

    asked = {"kind": "confirm", "id": "rest", "prompt": "Rest here?"}
    tools = KernelTools()
    add_suspend_tool(tools)
    tools.tool_writes.append({"type": "plugin.data", "payload": {"namespace": "n", "key": "k", "value": 1}})
    manifest = {"agent": {"tools": {"plugin": ["suspend"]}}}
    gateway = FakeGateway([reply("", ("suspend", {"interaction": asked}), finish="tool_calls")])
    outcome = await run(runtime(manifest=manifest), gateway, kernel_tools=tools)
    assert outcome.status == "suspended" and outcome.shown == {"interactions": [asked]} and outcome.stop_reason == "suspended"
    state = outcome.suspension
    assert state["conversation"][-1]["tool_calls"][0]["name"] == "suspend", "saved up to the call, without its own result"
    assert state["toolWrites"] == [{"type": "plugin.data", "payload": {"namespace": "n", "key": "k", "value": 1}}]

    resumed_tools = KernelTools()
    add_suspend_tool(resumed_tools)
    gateway = FakeGateway([reply('{"rested": true}')])
    outcome = await run_agent(runtime=runtime(manifest=manifest), scope=scope(), history=[], player_message="Yes", gateway=gateway,
                              hooks=FakeHooks(), on_narrative=no_stream, history_max_turns=5, kernel_tools=resumed_tools,
                              resume=Resume(json.loads(json.dumps(state)), {"confirmed": True}))
    assert outcome.status == "success" and resumed_tools.tool_writes == state["toolWrites"], "the held writes commit with the resumed run"
    sent = gateway.requests[0].messages
    assert sent[-1].role == "tool" and json.loads(sent[-1].content) == {"ok": True, "data": {"answer": {"confirmed": True}}}
    assert sent[0].role == "system" and sent[0].content == state["systemPrompt"], "no context assembled again"


async def test_a_plugin_tools_forms_and_blocks_become_the_runs_effects():
    form = {"kind": "form", "id": "sheet", "schema": {"type": "object", "properties": {"name": {"type": "string"}}}}
    manifest = {"agent": {"tools": {"plugin": ["look"]}}}
    hooks = FakeHooks(plugin_tools={"look": ({"type": "object"}, True)},
                      tool_results={"look": {"ok": True, "data": {"seen": "a door", "interactions": [form], "ui": [{"parts": [{"type": "text", "text": "A door"}]}]}}})
    gateway = FakeGateway([reply("", ("look", {}), finish="tool_calls"), reply('{"mood": "calm"}')])
    outcome = await run(runtime(manifest=manifest), gateway, hooks, output_schemas=SCHEMA)
    assert outcome.status == "success" and outcome.output == {"mood": "calm"}
    assert outcome.shown == {"interactions": [form], "ui": [{"parts": [{"type": "text", "text": "A door"}]}]}

    hooks.tool_results["look"] = {"ok": True, "data": {"notifications": [{"level": "loud", "text": "Boo"}]}}
    gateway = FakeGateway([reply("", ("look", {}), finish="tool_calls"), reply('{"mood": "calm"}')])
    outcome = await run(runtime(manifest=manifest), gateway, hooks, output_schemas=SCHEMA)
    assert outcome.status == "failed" and "output-schema-invalid: a tool's effects.notifications[0].level is 'loud'" in outcome.reason


async def test_a_pre_llm_call_response_answers_the_call_without_the_model():
    """PreLLMCall's replace.response (a hookspec's LLMCallDecision.finish): no gateway call; PostLLMResponse sees it."""
    reviewed = []
    answered = iter([{"response": {"content": json.dumps({"mood": "tense"})}}])
    hooks = FakeHooks(handlers={"PreLLMCall": lambda payload: next(answered, None),
                                "PostLLMResponse": lambda payload: reviewed.append(payload["response"])})
    gateway = FakeGateway([])
    outcome = await run(runtime(), gateway, hooks, output_schemas=SCHEMA)
    assert outcome.status == "success" and outcome.output == {"mood": "tense"}
    assert gateway.requests == [], "the model was not asked"
    assert reviewed == [{"content": '{"mood": "tense"}', "finishReason": "stop", "toolCalls": [],
                         "usage": {"promptTokens": 0, "completionTokens": 0, "totalTokens": 0}}]
    # A response without text content is ignored: the model answers.
    hooks = FakeHooks(handlers={"PreLLMCall": lambda payload: {"response": {"content": 7}}})
    gateway = FakeGateway([reply(json.dumps({"mood": "calm"}))])
    outcome = await run(runtime(), gateway, hooks, output_schemas=SCHEMA)
    assert outcome.output == {"mood": "calm"} and len(gateway.requests) == 1


async def test_a_pre_tool_use_result_answers_the_call_without_running_it():
    """PreToolUse's replace.result, this kernel's extension (docs/hooks.md; issue 40, 13), which a hookspec's
    ToolCallDecision.replace rides on: nothing runs, a successful call."""
    posted = []
    manifest = {"agent": {"tools": {"plugin": ["save"]}, "finishWith": "save"}}
    hooks = FakeHooks(plugin_tools={"save": ({"type": "object"}, False)},
                      handlers={"PreToolUse": lambda payload: {"result": {"answered": payload["toolCall"]["name"]}},
                                "PostToolUse": lambda payload: posted.append(payload["result"])})
    gateway = FakeGateway([reply("", ("save", {"n": 1}))])
    outcome = await run(runtime(manifest=manifest), gateway, hooks)
    # A successful call of the finishWith tool: its answer is the output.
    assert outcome.status == "success" and outcome.stop_reason == "tool-finished", outcome.reason
    assert outcome.output == {"answered": "save"} and hooks.tool_calls == [], "the tool never ran"
    assert posted == [{"result": json.dumps({"ok": True, "data": {"answered": "save"}}), "success": True}]

    # A kernel tool answered by a hook does not run either: what it would have done does not happen.
    manifest = {"agent": {"completion": {"require": "explicit"}}}
    gateway = FakeGateway([reply("", ("runtime-done", {}))])
    outcome = await run(runtime(manifest=manifest), gateway, hooks)
    assert outcome.status == "failed" and "runtime-done" in outcome.reason and len(gateway.requests) == 1
    assert json.loads(posted[-1]["result"]) == {"ok": True, "data": {"answered": "runtime-done"}} and posted[-1]["success"]


async def test_pre_step_interjections_join_a_steering_run_as_interject_does():
    """PreStep's replace.interjections (a hookspec steering inbox drained): merged before the step's model call."""
    steps = []
    hooks = FakeHooks(plugin_tools={"look": ({"type": "object"}, True)},
                      handlers={"PreStep": lambda payload: steps.append(payload["steering"]) or {"interjections": ["Psst!"]}})
    manifest = {"agent": {"tools": {"plugin": ["look"]}}}
    gateway = FakeGateway([reply("The harbour is quiet.")])
    outcome = await run(runtime(manifest=manifest, visibility="story"), gateway, hooks)
    assert outcome.status == "success" and steps == [True]
    assert gateway.requests[0].messages[-1].content == "(The player interjects) Psst!"
    # A run without steering (a system agent) ignores them, and says so in step.completed.
    gateway = FakeGateway([reply("Done.")])
    outcome = await run(runtime(manifest=manifest), gateway, hooks)
    assert all("interjects" not in message.content for message in gateway.requests[0].messages)
    assert any("interjections: this run takes no interjections" in entry.message for entry in outcome.trace)

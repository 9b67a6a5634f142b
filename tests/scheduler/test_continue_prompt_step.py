"""PreStep after a step that continued (the spec's StepFinished with status "continue", which continue_prompt
rides on): the payload's `previous`, and replace.nextPrompt joining the run as a user message
(services/scheduler/agent/continued_step.py, services/scheduler/hooks/rules.py, agent/loop.py)."""

from __future__ import annotations

import copy
import json

import pytest

from services.scheduler.agent.continued_step import previous_step
from services.scheduler.agent.loop import run_agent
from services.scheduler.agent.suspension import add_suspend_tool
from services.scheduler.execution.kernel_tools import KernelTools
from services.scheduler.execution.outcome import Resume
from services.scheduler.hooks.rules import MAX_NEXT_PROMPT_CHARS, apply_pre_step
from tests.scheduler.agent_harness import FakeGateway, FakeHooks, no_stream, reply, runtime, scope

MANIFEST = {"agent": {"tools": {"plugin": ["look"]}}}


def look_hooks(pre_step) -> FakeHooks:
    return FakeHooks(plugin_tools={"look": ({"type": "object"}, True)}, handlers={"PreStep": pre_step})


async def run(gateway, hooks, rt=None):
    return await run_agent(runtime=rt or runtime(manifest=MANIFEST), scope=scope(), history=[], player_message="Look around.",
                           gateway=gateway, hooks=hooks, on_narrative=no_stream, history_max_turns=5)


def ignored(outcome) -> list[str]:
    return [item for entry in outcome.trace if entry.event == "step.completed" for item in json.loads(entry.message)["ignored"]]


def test_next_prompt_is_accepted_as_a_non_empty_text_within_the_limit():
    assert apply_pre_step([], "auto", 5, {"nextPrompt": "Now check the lamp."}).next_prompt == "Now check the lamp."
    assert apply_pre_step([], "auto", 5, {"nextPrompt": "x" * MAX_NEXT_PROMPT_CHARS}).ignored == []
    assert apply_pre_step([], "auto", 5, {}).next_prompt is None


@pytest.mark.parametrize(("wanted", "note"), [
    (42, "nextPrompt: not a text (int)"),
    (["Go on."], "nextPrompt: not a text (list)"),
    ("  \n", "nextPrompt: empty"),
    ("x" * (MAX_NEXT_PROMPT_CHARS + 1), f"nextPrompt: {MAX_NEXT_PROMPT_CHARS + 1} characters (at most {MAX_NEXT_PROMPT_CHARS})"),
])
def test_an_invalid_next_prompt_is_ignored_with_a_note(wanted, note):
    plan = apply_pre_step([], "auto", 5, {"nextPrompt": wanted})
    assert plan.next_prompt is None and plan.ignored == [note]


def test_a_next_prompt_with_a_stop_is_not_sent():
    plan = apply_pre_step([], "auto", 5, {"nextPrompt": "Go on.", "stop": {"reason": "tool-finished"}})
    assert plan.stop == {"reason": "tool-finished"} and plan.next_prompt is None
    assert plan.ignored == ["nextPrompt: not sent: the step was stopped"]


def test_previous_tells_the_last_tool_step_its_prompt_and_output():
    conversation = [{"role": "user", "content": "Look around."}, {"role": "assistant", "content": "Let me see.", "tool_calls": [{"id": "c"}]},
                    {"role": "tool", "tool_call_id": "c", "content": "{}"}, {"role": "user", "content": "(The player interjects) hm"}]
    previous = previous_step(conversation)
    assert previous == {"status": "continue", "prompt": "Look around.", "output": "Let me see.", "messages": conversation}
    assert previous["messages"] is conversation, "not copied: serialised only when a listener gets it"
    assert previous_step([{"role": "assistant", "content": None, "tool_calls": [{"id": "c"}]}])["prompt"] is None


async def test_previous_comes_from_step_two_and_next_prompt_joins_the_next_model_call():
    seen = []

    def pre_step(payload):
        seen.append(copy.deepcopy(payload))
        return {"nextPrompt": "Now describe what the lamp shows."} if "previous" in payload else None

    gateway = FakeGateway([reply("Checking.", ("look", {})), reply("The lamp shows a door.")])
    outcome = await run(gateway, look_hooks(pre_step))
    assert outcome.status == "success" and [payload["step"] for payload in seen] == [1, 2]
    assert "previous" not in seen[0]
    previous = seen[1]["previous"]
    assert (previous["status"], previous["prompt"], previous["output"]) == ("continue", "Look around.", "Checking.")
    assert [m["role"] for m in previous["messages"]][-2:] == ["assistant", "tool"]
    assert all(m["role"] != "system" for m in previous["messages"])
    sent = gateway.requests[1].messages
    assert (sent[-1].role, sent[-1].content) == ("user", "Now describe what the lamp shows.")
    assert sent[-2].role == "tool", "right after the tool results, a plain user message"
    assert ignored(outcome) == []


async def test_a_next_prompt_stays_in_the_runs_conversation():
    def pre_step(payload):
        return {"nextPrompt": f"Step {payload['step']} prompt."} if "previous" in payload else None

    gateway = FakeGateway([reply("", ("look", {})), reply("", ("look", {"again": True})), reply("Done.")])
    outcome = await run(gateway, look_hooks(pre_step))
    assert outcome.status == "success"
    third = [(m.role, m.content) for m in gateway.requests[2].messages if m.role == "user"]
    assert third[-2:] == [("user", "Step 2 prompt."), ("user", "Step 3 prompt.")]


async def test_without_a_next_prompt_the_run_goes_on_unchanged():
    gateway = FakeGateway([reply("", ("look", {})), reply("A door.")])
    outcome = await run(gateway, look_hooks(lambda payload: None))
    assert outcome.status == "success" and gateway.requests[1].messages[-1].role == "tool"


async def test_an_invalid_next_prompt_is_not_sent_and_noted_in_step_completed():
    gateway = FakeGateway([reply("", ("look", {})), reply("A door.")])
    outcome = await run(gateway, look_hooks(lambda payload: {"nextPrompt": ""} if "previous" in payload else None))
    assert outcome.status == "success" and gateway.requests[1].messages[-1].role == "tool"
    assert ignored(outcome) == ["nextPrompt: empty"]


async def test_a_correction_round_is_no_continued_step():
    """A plain answer before a required tool call gets a correction: the next step follows no tool step."""
    seen = []
    manifest = {"agent": {"tools": {"plugin": ["look"]}, "finishWith": "look"}}
    gateway = FakeGateway([reply("Just prose."), reply("", ("look", {}))])
    outcome = await run(gateway, look_hooks(lambda payload: seen.append("previous" in payload)), runtime(manifest=manifest))
    assert outcome.status == "success" and seen == [False, False]


async def test_a_resumed_run_continues_from_its_suspend_step():
    asked = {"kind": "confirm", "id": "rest", "prompt": "Rest here?"}
    manifest = {"agent": {"tools": {"plugin": ["suspend"]}}}
    tools = KernelTools()
    add_suspend_tool(tools)
    gateway = FakeGateway([reply("Asking.", ("suspend", {"interaction": asked}), finish="tool_calls")])
    suspended = await run_agent(
        runtime=runtime(manifest=manifest), scope=scope(), history=[], player_message="Look around.", gateway=gateway,
        hooks=FakeHooks(), on_narrative=no_stream, history_max_turns=5, kernel_tools=tools)
    assert suspended.status == "suspended"
    seen = []
    resumed_tools = KernelTools()
    add_suspend_tool(resumed_tools)
    hooks = FakeHooks(handlers={"PreStep": lambda payload: seen.append(copy.deepcopy(payload)) or {"nextPrompt": "Go on."}})
    gateway = FakeGateway([reply('{"rested": true}')])
    outcome = await run_agent(runtime=runtime(manifest=manifest), scope=scope(), history=[], player_message="Yes", gateway=gateway,
                              hooks=hooks, on_narrative=no_stream, history_max_turns=5, kernel_tools=resumed_tools,
                              resume=Resume(json.loads(json.dumps(suspended.suspension)), {"confirmed": True}))
    assert outcome.status == "success"
    assert seen[0]["step"] == 2 and seen[0]["previous"]["output"] == "Asking."
    assert seen[0]["previous"]["messages"][-1]["role"] == "tool"
    assert (gateway.requests[0].messages[-1].role, gateway.requests[0].messages[-1].content) == ("user", "Go on.")

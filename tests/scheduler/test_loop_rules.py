"""The agent loop's pure decisions (agent/loop_rules.py): no model, hooks or services."""

from __future__ import annotations

import pytest

from services.scheduler.agent import loop_rules
from services.scheduler.agent.loop_rules import Completion


def _unmet(completion: Completion, done: bool = False, finished: bool = False, business: bool = False) -> str:
    return completion.unmet(done_called=done, finished_by_tool=finished, business_call=business)


def test_no_completion_condition_is_always_met():
    assert _unmet(Completion("", frozenset())) == ""
    assert Completion("", frozenset()).correction() == "You must finish by calling one of your tools."


def test_explicit_completion_needs_runtime_done_or_a_completion_tool():
    explicit = Completion("explicit", frozenset())
    assert _unmet(explicit, business=True) == "completion: the agent finished without runtime-done or a completion tool"
    assert _unmet(explicit, done=True) == _unmet(explicit, finished=True) == ""
    assert Completion("explicit", frozenset({"save"})).correction() == "You must finish by calling runtime-done or save."


def test_tool_use_completion_needs_a_listed_tool_or_any_business_call():
    listed = Completion("tool-use", frozenset({"save", "commit"}))
    assert _unmet(listed, business=True) == "completion: the agent finished without a successful call of commit, save"
    assert _unmet(listed, finished=True) == ""
    assert listed.correction() == "You must finish by calling commit or save."
    any_tool = Completion("tool-use", frozenset())
    assert _unmet(any_tool) == "completion: the agent finished without a successful call of one of its tools"
    assert _unmet(any_tool, business=True) == ""


@pytest.mark.parametrize("steps_remaining, finalizing, allowed, tool_steps, met, expected", [
    (1, False, True, 0, False, "go"),
    (0, True, False, 0, False, "go"),  # the finaliser's own request
    (0, False, True, 2, True, "finalize"),
    (0, False, False, 2, True, "fail"),  # finalizer.maxSteps: false
    (0, False, True, 0, True, "fail"),  # no tool work: nothing to finalise
    (-1, False, True, 2, False, "fail"),  # the completion condition does not hold
])
def test_step_budget(steps_remaining, finalizing, allowed, tool_steps, met, expected):
    assert loop_rules.step_budget(steps_remaining, finalizing=finalizing, finalizer_allowed=allowed, tool_steps=tool_steps,
                                  completion_met=met) == expected


@pytest.mark.parametrize("remaining_s, reserve_s, step, finalizing, met, expected", [
    (5.0, 6.0, 1, False, True, True),
    (7.0, 6.0, 1, False, True, False),  # not yet inside the reserve
    (2.0, 6.0, 1, False, True, False),  # too little time to write an answer
    (5.0, 6.0, 0, False, True, False),  # before the first step
    (5.0, 0.0, 1, False, True, False),  # no reserve
    (5.0, 6.0, 1, True, True, False),  # already finalising
    (5.0, 6.0, 1, False, False, False),  # a completion tool is still required
])
def test_deadline_reserve(remaining_s, reserve_s, step, finalizing, met, expected):
    assert loop_rules.deadline_reserve_reached(remaining_s, reserve_s, step=step, finalizing=finalizing, completion_met=met) is expected


def test_truncation_keeps_a_cut_off_story_retries_once_then_fails():
    def verdict(finish, accept=False, calls=False, text=True, retried=False):
        return loop_rules.truncation(finish, accept=accept, has_calls=calls, has_text=text, retried=retried)

    assert verdict("stop") == ("none", "") and verdict("tool_calls", retried=True) == ("none", "")
    assert verdict("length", accept=True)[0] == "accept" and "mid-sentence" in verdict("length", accept=True)[1]
    assert verdict("other", accept=True)[0] == "accept" and "retry the turn" in verdict("other", accept=True)[1]
    # Tool calls or no text cannot be kept.
    assert verdict("length", accept=True, calls=True) == ("retry", loop_rules.TRUNCATION_HINT)
    assert verdict("length", accept=True, text=False)[0] == "retry"
    assert verdict("length", retried=True) == (
        "fail", "truncated: the reply hit the model's output limit twice; raise the output limit of this slot")
    assert verdict("other") == ("fail", "finish-other: the provider stopped the reply without saying why")


def test_repair_needs_problems_a_normal_ending_repairs_and_time():
    assert loop_rules.repair_wanted(["x"], notice="", repairs_left=1, remaining_s=10.0)
    assert not loop_rules.repair_wanted([], notice="", repairs_left=1, remaining_s=10.0)
    assert not loop_rules.repair_wanted(["x"], notice="cut off", repairs_left=1, remaining_s=10.0)
    assert not loop_rules.repair_wanted(["x"], notice="", repairs_left=0, remaining_s=10.0)
    assert not loop_rules.repair_wanted(["x"], notice="", repairs_left=1, remaining_s=1.0)


def test_repair_prompt_lists_at_most_five_problems():
    prompt = loop_rules.repair_prompt([f"p{n}" for n in range(7)], story=False)
    assert prompt.startswith(loop_rules.REPAIR_PROMPT_JSON) and prompt.endswith("- p4") and "p5" not in prompt
    assert loop_rules.repair_prompt(["empty"], story=True) == f"{loop_rules.REPAIR_PROMPT}\n- empty"


def test_call_signature_compares_names_and_arguments_in_order():
    look = {"id": "1", "name": "look", "arguments": '{"at": "door"}'}
    same_elsewhere = {"id": "2", "name": "look", "arguments": '{"at": "door"}'}
    assert loop_rules.call_signature([look]) == loop_rules.call_signature([same_elsewhere])
    assert loop_rules.call_signature([look]) != loop_rules.call_signature([{**look, "arguments": '{"at": "window"}'}])


@pytest.mark.parametrize("repeats, detection, perturbations, fallback, expected", [
    (2, 3, 1, "fail", "none"),
    (3, 0, 1, "fail", "none"),  # loopDetection: 0 turns it off
    (3, 3, 1, "fail", "perturb"),
    (3, 3, 0, "answer-without-tools", "tools-off"),
    (4, 3, 0, "fail", "fail"),
])
def test_loop_verdict(repeats, detection, perturbations, fallback, expected):
    assert loop_rules.loop_verdict(repeats, loop_detection=detection, perturbations_left=perturbations, fallback=fallback) == expected


def test_pre_llm_call_replaces_this_call_only_with_known_tools():
    from services.scheduler.agent.model_call import apply_pre_llm_call

    sent = [{"role": "system", "content": "x"}]
    kept = apply_pre_llm_call({}, sent, "story", ["look"], available={"look": 1}, tools_offered=True, stream=True)
    assert (kept.messages, kept.model, kept.tools, kept.stream) == (sent, "story", ["look"], True)
    replaced = apply_pre_llm_call({"messages": [], "model": "fast", "tools": ["look", "fly"], "stream": False}, sent, "story",
                                  ["look"], available={"look": 1}, tools_offered=True, stream=True)
    assert (replaced.messages, replaced.model, replaced.tools, replaced.stream) == ([], "fast", ["look"], False)
    # A hook cannot turn streaming on, nor offer tools to the finaliser; an empty model keeps the runtime's.
    off = apply_pre_llm_call({"model": "", "tools": ["look"], "stream": True}, sent, "story", [], available={"look": 1},
                             tools_offered=False, stream=False)
    assert (off.model, off.tools, off.stream) == ("story", [], False)

"""Each site rule of the hook contract, as the turn and the agent loop apply it."""

import pytest

from services.scheduler.hooks.rules import (
    apply_post_tool_use,
    apply_pre_step,
    apply_pre_tool_use,
    filter_schedule,
    refused_tool_result,
    stopped_by_pre_step_error,
)


def test_pre_schedule_filters_and_reorders_but_never_adds() -> None:
    selected = ["a", "b", "c"]
    assert filter_schedule(selected, [{"name": "c"}, {"name": "a"}, {"name": "x"}, {"name": "a"}]) == ["c", "a"]
    assert filter_schedule(selected, []) == []
    assert filter_schedule(selected, "garbage") == selected


def test_pre_step_tools_narrow_to_a_subset_and_unknown_names_are_recorded() -> None:
    plan = apply_pre_step(["search", "save"], "auto", 5, {"tools": ["save", "delete"]})
    assert plan.tools == ["save"] and plan.ignored == ["tools: delete"]


@pytest.mark.parametrize(
    ("choice", "correcting", "expected"),
    [("required", False, "required"), ("auto", False, "auto"), ("auto", True, "required"),
     ({"name": "save"}, False, {"name": "save"}), ({"name": "gone"}, False, "required"), ("sometimes", False, "required")],
)
def test_pre_step_tool_choice(choice, correcting, expected) -> None:
    plan = apply_pre_step(["search", "save"], "required", 5, {"toolChoice": choice}, correcting=correcting)
    assert plan.tool_choice == expected


def test_pre_step_tool_choice_name_must_be_offered_this_step() -> None:
    plan = apply_pre_step(["search", "save"], "auto", 5, {"tools": ["search"], "toolChoice": {"name": "save"}})
    assert plan.tool_choice == "auto" and plan.ignored


@pytest.mark.parametrize(("steps", "expected"), [(2, 2), (1, 1), (0, 5), (9, 5), (True, 5), ("2", 5)])
def test_pre_step_steps_remaining_only_lowers_to_at_least_one(steps, expected) -> None:
    assert apply_pre_step([], "auto", 5, {"stepsRemaining": steps}).steps_remaining == expected


def test_pre_step_stop() -> None:
    assert apply_pre_step([], "auto", 3, {"stop": {"reason": "tool-finished"}}).stop == {"reason": "tool-finished"}
    plan = apply_pre_step([], "auto", 3, {"stop": {"reason": "cancelled", "message": "budget"}})
    assert stopped_by_pre_step_error("p/r", plan.stop) == 'Runtime "p/r" was stopped by a PreStep hook: budget'
    assert apply_pre_step([], "auto", 3, {"stop": {"reason": "bored"}}).stop is None


def test_pre_tool_use_keeps_the_id_and_refuses_with_the_reason() -> None:
    call = {"id": "call-1", "name": "delete-note", "arguments": "{}"}
    replaced = apply_pre_tool_use(call, {"toolCall": {"id": "other", "name": "archive-note", "arguments": {"note": 3}}})
    assert replaced == {"id": "call-1", "name": "archive-note", "arguments": '{"note": 3}'}
    assert refused_tool_result("no deleting") == {"ok": False, "error": {"code": "refused", "message": "no deleting"}}


def test_post_tool_use_rewrites_what_the_model_reads_only() -> None:
    result = {"result": '{"ok": false}', "error": {"code": "x", "message": "m"}, "success": False}
    outcome = apply_post_tool_use(result, {"result": {"result": "softened", "error": None, "success": True}, "terminate": True})
    assert outcome.result == {"result": "softened", "error": {"code": "x", "message": "m"}, "success": False}
    assert outcome.terminate
    assert apply_post_tool_use(result, {"terminate": "yes"}).terminate is False


def test_read_only_calls_pool_and_others_are_barriers() -> None:
    from services.scheduler.agent.tool_calls import tool_batches

    calls = [{"name": n} for n in ["look", "look", "save", "look", "find", "look", "save"]]
    read_only = {"look", "find"}.__contains__
    assert [[c["name"] for c in batch] for batch in tool_batches(calls, read_only)] == [
        ["look", "look"], ["save"], ["look", "find", "look"], ["save"]]

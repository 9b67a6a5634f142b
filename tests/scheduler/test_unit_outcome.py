"""One runtime's outcome as the kernel settles it (turn/unit_outcome.py)."""

from __future__ import annotations

from types import SimpleNamespace

from services.scheduler.execution.outcome import RuntimeOutcome
from services.scheduler.execution.story_output import normalize_story
from services.scheduler.turn.unit_outcome import (
    apply_post_runtime,
    gate_outcome,
    post_runtime_result,
    without_discarded_writes,
)

FUNCTION = SimpleNamespace(plugin_id="p", runtime_id="p/f", type="function")
AGENT = SimpleNamespace(plugin_id="p", runtime_id="p/story", type="agent")


def test_a_pre_runtime_abort_comes_before_a_failed_input() -> None:
    assert gate_outcome(False, "", "") is None
    skipped = gate_outcome(True, "hook said no", "input x: missing")
    assert skipped is not None and (skipped.status, skipped.reason) == ("skipped", "hook said no")
    gated = gate_outcome(False, "", "input x: missing")
    assert gated is not None and (gated.status, gated.reason) == ("skipped", "input x: missing")


def test_post_runtime_sees_the_value_only_when_there_is_one() -> None:
    outcome = RuntimeOutcome("success", output={"a": 1}, run_id="run", canonical_value=1, has_value=True)
    shown = post_runtime_result(FUNCTION, outcome, "turn")
    assert shown == {"pluginId": "p", "runtimeId": "p/f", "runId": "run", "turnId": "turn", "status": "success", "reason": "",
                     "output": {"a": 1}, "pendingProposals": [], "canonicalValue": 1}
    assert "canonicalValue" not in post_runtime_result(FUNCTION, RuntimeOutcome("success"), "turn")


def test_an_unchanged_result_changes_nothing() -> None:
    outcome = RuntimeOutcome("success", output={"a": 1})
    original = post_runtime_result(FUNCTION, outcome, "turn")
    assert apply_post_runtime(FUNCTION, outcome, original, dict(original)) is outcome and outcome.output == {"a": 1}


def test_a_replaced_function_output_takes_its_value() -> None:
    outcome = RuntimeOutcome("success", output={"a": 1}, canonical_value=1, has_value=True)
    original = post_runtime_result(FUNCTION, outcome, "turn")
    apply_post_runtime(FUNCTION, outcome, original, {**original, "output": {"a": 2}, "canonicalValue": 2})
    assert (outcome.output, outcome.canonical_value, outcome.has_value) == ({"a": 2}, 2, True)
    apply_post_runtime(FUNCTION, outcome, post_runtime_result(FUNCTION, outcome, "turn"), {"output": {"a": 3}})
    assert outcome.output == {"a": 3} and not outcome.has_value, "an output without a matching value drops the value"


def test_a_changed_status_discards_the_story() -> None:
    outcome = RuntimeOutcome("success", story=normalize_story({"text": "Once."}), output={"text": "Once."})
    original = post_runtime_result(AGENT, outcome, "turn")
    apply_post_runtime(AGENT, outcome, original, {"status": "failed", "reason": "vetoed"})
    assert (outcome.status, outcome.reason, outcome.story) == ("failed", "vetoed", None)


def test_a_rewritten_story_is_checked_again() -> None:
    outcome = RuntimeOutcome("success", story=normalize_story({"text": "Once."}))
    outcome.output = outcome.story.to_output()
    apply_post_runtime(AGENT, outcome, post_runtime_result(AGENT, outcome, "turn"), {"output": {"text": "Twice."}})
    assert outcome.story is not None and outcome.story.narrative_output == "Twice." and outcome.status == "success"
    apply_post_runtime(AGENT, outcome, post_runtime_result(AGENT, outcome, "turn"), {"output": {"text": ""}})
    assert (outcome.status, outcome.story) == ("failed", None) and "no text" in outcome.reason


def test_only_a_success_or_a_guard_skip_keeps_its_writes() -> None:
    write = {"type": "plugin.data.set", "payload": {}}
    assert without_discarded_writes(RuntimeOutcome("success", writes=[write])).writes == [write]
    assert without_discarded_writes(RuntimeOutcome("skipped", writes=[write], guard_skipped=True)).writes == [write]
    assert without_discarded_writes(RuntimeOutcome("failed", writes=[write])).writes == []

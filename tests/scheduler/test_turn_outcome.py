"""How a turn ends: a failed story fails it (turn/outcome.py)."""

from __future__ import annotations

from covel.store.v1 import store_pb2
from services.scheduler.turn.outcome import story_failure


def result(runtime_id: str, status: str, *, story: bool = True, reason: str = "") -> store_pb2.RuntimeResult:
    return store_pb2.RuntimeResult(runtime_id=runtime_id, status=status, story=story, reason=reason)


def test_no_story_or_one_successful_story_goes_on_to_commit() -> None:
    assert story_failure([]) == ""
    assert story_failure([result("p/audit", "failed", story=False)]) == "", "a system runtime's failure does not fail the turn"
    assert story_failure([result("p/a", "failed"), result("p/b", "success")]) == ""


def test_stories_that_ran_and_none_succeeded_fail_the_turn_naming_the_first() -> None:
    results = [result("p/audit", "success", story=False), result("p/a", "skipped", reason="guard"), result("p/b", "failed", reason="x")]
    assert story_failure(results) == "story runtime p/a skipped: guard"

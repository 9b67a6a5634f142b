"""How a turn ends: whether its story runtimes failed it, and whether it asks for the next turn (auto-advance)."""

from __future__ import annotations

from collections.abc import Iterable

from covel.store.v1 import store_pb2
from services.scheduler.execution.outcome import OutcomeStatus
from shared.structs import from_struct


def story_failure(results: Iterable[store_pb2.RuntimeResult]) -> str:
    """Why the turn fails when story runtimes ran and none succeeded ("" when it goes on to commit)."""
    stories = [result for result in results if result.story]
    # A story that suspended to ask the player goes on when answered: its turn commits without a story.
    if not stories or any(result.status in (OutcomeStatus.SUCCESS, OutcomeStatus.SUSPENDED) for result in stories):
        return ""
    failed = next(result for result in stories if result.status != OutcomeStatus.SUCCESS)
    return f"story runtime {failed.runtime_id} {failed.status}: {failed.reason}"


def story_failure_passes(results: Iterable[store_pb2.RuntimeResult]) -> bool:
    """Whether the failure story_failure names is a passing one (its story failed after a peer outage)."""
    stories = [result for result in results if result.story]
    return bool(stories) and all(result.status != OutcomeStatus.SUCCESS for result in stories) and \
        next(result for result in stories if result.status != OutcomeStatus.SUCCESS).retryable


def runtime_failure_passes(results: Iterable[store_pb2.RuntimeResult], runtime_id: str) -> bool:
    """Whether the one runtime a job's or manual run's turn ran failed for a passing reason: running it again may succeed."""
    return any(result.runtime_id == runtime_id and result.status == OutcomeStatus.FAILED and result.retryable for result in results)


def requests_advance(turn: store_pb2.Turn) -> bool:
    """Exactly one committed top-level story, and it yields `continue`."""
    if turn.status != store_pb2.TURN_STATUS_COMMITTED:
        return False
    stories = [message for message in turn.messages if message.role == "story"]
    return len(stories) == 1 and from_struct(stories[0].metadata).get("yield") == "continue"

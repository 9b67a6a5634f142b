"""Which runtimes a turn schedules: stage, trigger type, every N, startTurn, cooldown, max count."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from covel.registry.v1 import registry_pb2
from covel.store.v1 import store_pb2
from covel.store.v1.store_pb2 import TURN_STATUS_COMMITTED as COMMITTED
from services.scheduler.catalogue import Package
from services.scheduler.execution.outcome import OutcomeStatus
from services.scheduler.kinds import Stage, TriggerType
from services.scheduler.recently_used import RecentlyUsed
from shared.manifest import CompiledManifest

STAGES = tuple(Stage)


@dataclass
class TriggerHistory:
    """How often, and when last, each runtime ran in committed turns (a rolled-back turn never counts)."""

    counts: dict[str, int] = field(default_factory=dict)
    last_turn: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_turns(cls, turns: Iterable[Any]) -> TriggerHistory:
        history = cls()
        for turn in turns:
            history.add(turn)
        return history

    def add(self, turn: Any) -> None:
        """Count one recorded turn (nothing unless it committed and is on the story's line: a turn rewound past
        or a version not chosen triggers nothing any more)."""
        if turn.status != COMMITTED or turn.off_line:
            return
        for result in turn.runtime_results:
            if result.status in (OutcomeStatus.SUCCESS, OutcomeStatus.FAILED):
                self.counts[result.runtime_id] = self.counts.get(result.runtime_id, 0) + 1
                self.last_turn[result.runtime_id] = max(self.last_turn.get(result.runtime_id, 0), turn.logical_turn)


class TriggerHistories:
    """Per session, its TriggerHistory as of a number of recorded turns and the head of the story's line
    (Session.recorded_turns, head_turn_id).

    A turn's lease answers the session with both: when they are those the history was built from, the
    history is the session's, and the turn reads no turn records; each turn this replica records adds
    itself. A count or a head that differs (another replica ran turns, a retried commit, a move of the
    story's line) means the history is read again (ListTurns)."""

    def __init__(self, capacity: int = 10_000) -> None:
        self._histories: RecentlyUsed[str, tuple[tuple[int, str], TriggerHistory]] = RecentlyUsed(capacity)

    def get(self, session: store_pb2.Session) -> TriggerHistory | None:
        found = self._histories.get(session.id)
        return found[1] if found is not None and found[0] == (session.recorded_turns, session.head_turn_id) else None

    def remember(self, session: store_pb2.Session, history: TriggerHistory) -> None:
        self._histories.put(session.id, ((session.recorded_turns, session.head_turn_id), history))

    def recorded(self, session: store_pb2.Session, turn: store_pb2.Turn) -> None:
        """`turn` was recorded under the lease that answered `session`: the next lease sees one turn more."""
        history = self.get(session)
        if history is None:
            return
        history.add(turn)
        head = turn.id if turn.status == COMMITTED else session.head_turn_id
        self._histories.put(session.id, ((session.recorded_turns + 1, head), history))



# -- plugins that do not run now ------------------------------------------------------------------
# The registry's ResolveConfirmedSessionPlugins, given the session's approvals, is the one trust
# gate: a community plugin not approved (and whatever needs what only it provides) is unavailable,
# so none of its runtimes, guards, hooks, tools, extension providers or detached jobs start. The
# turn record lists the runtimes it would have scheduled as skipped, with why.


def unavailable_reason(rejection: registry_pb2.RejectedPlugin) -> str:
    """E.g. "approval-required: plugin `x` is a community plugin; approve it with SetPluginApprovals"."""
    return f"{rejection.code}: {rejection.reason}"


def sitting_out(
    packages: Iterable[Package], unavailable: Iterable[registry_pb2.RejectedPlugin], logical_turn: int
) -> list[store_pb2.RuntimeResult]:
    """Skipped results for the runtimes of unavailable plugins that this turn would have scheduled.
    None is marked setup: it never ran, so it records no setup progress (it runs as late setup once
    its plugin runs)."""
    reasons = {rejection.plugin_id: unavailable_reason(rejection) for rejection in unavailable}
    return [
        store_pb2.RuntimeResult(
            runtime_id=runtime.runtime_id, plugin_id=package.id, status="skipped", reason=reasons[package.id],
            concealed=runtime.manifest.io.concealed,
        )
        for package in packages if package.id in reasons
        for runtime in package.runtimes
        if scheduled_this_turn(runtime.manifest, runtime.stage, logical_turn)
    ]


def needs_history(manifest: CompiledManifest) -> bool:
    trigger = manifest.schedule.trigger
    return trigger.cooldown_turns is not None or trigger.max_trigger_count is not None


def scheduled_this_turn(
    manifest: CompiledManifest, stage: str, logical_turn: int, history: TriggerHistory | None = None
) -> bool:
    schedule = manifest.schedule
    if schedule.subagent_only or stage not in STAGES:
        return False
    trigger = schedule.trigger
    if trigger.type != TriggerType.AUTO:
        return False
    if schedule.every > 1 and logical_turn % schedule.every != 0:
        return False
    if trigger.start_turn is not None and logical_turn < trigger.start_turn:
        return False
    if history is not None:
        limit = trigger.max_trigger_count
        if limit is not None and history.counts.get(manifest.id, 0) >= limit:
            return False
        cooldown = trigger.cooldown_turns
        last = history.last_turn.get(manifest.id)
        if cooldown is not None and last is not None and logical_turn - last <= cooldown:
            return False
    return True


# -- setup runtimes ------------------------------------------------------------------------------
# A setup runtime's completion is recorded per plugin version (Session.setup_runtimes): done or
# blocked runtimes do not run again until the plugin's version changes; then they run once more,
# in the setup stage of a session still in setup, or as late setup (before pre-turn) of a session
# already playing, with a fresh retry budget.
SETUP_MAX_ATTEMPTS = 3


def setup_due(progress: dict[str, Any] | None, version: str) -> bool:
    if not progress or progress.get("version") != version:
        return True
    return progress.get("state") not in ("done", "blocked")


def setup_progress(previous: dict[str, Any] | None, version: str, status: str, reason: str, *, completed: bool,
                   waived: bool = False, pending: bool = False) -> dict[str, Any] | None:
    """The progress a setup runtime's result records: None when it did not really run (gated, vetoed).
    `waived`: its guard found the work done already ({skip: true}); `pending`: it succeeded but said its work
    is not done yet (completion: pending; it runs again at the next action, which is no failed attempt)."""
    if waived:
        return {"state": "done", "resolution": "waived", "version": version}
    if completed:
        return {"state": "done", "resolution": "completed", "version": version}
    if pending and status == "success":
        return {"state": "pending", "version": version}
    if status != "failed":
        return None
    # Attempts count per version: a new version of the runtime starts again at 1.
    earlier = previous.get("attempts", 0) if previous and previous.get("version") == version else 0
    attempts = int(earlier) + 1
    if attempts >= SETUP_MAX_ATTEMPTS:
        return {"state": "blocked", "reason": f"failed {attempts} times", "lastError": reason, "attempts": attempts, "version": version}
    return {"state": "pending", "lastError": reason, "attempts": attempts, "version": version}

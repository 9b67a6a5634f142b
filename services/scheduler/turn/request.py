"""What a turn is asked to run (TurnRequest), and the stop a Cancel sets on a submit's turns."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from covel.common.v1 import common_pb2
from covel.store.v1 import store_pb2
from services.scheduler.turn.interaction_answers import ResumeCall
from services.scheduler.turn.plugin_actions import ActionCall


@dataclass
class TurnRequest:
    session_id: str
    actions: list[common_pb2.PlayerAction]
    idempotency_key: str
    origin: str = "player"
    # RunManual: the one runtime this execution runs, and what the caller hands it.
    manual_runtime_id: str = ""
    activation: dict | None = None
    # A detached job a worker claimed: this execution runs its runtime on the source turn's snapshot.
    detached_job: store_pb2.DetachedJob | None = None
    # A submit's turns (its own and its continuations): Cancel stops them, even one still taking its lease.
    stop: AdvanceStop | None = None
    # A settlement retry: the open receipt whose maintainer this execution runs on the source turn's inputs.
    settlement: store_pb2.DimensionSettlement | None = None
    # The kernel already retried the session's open receipts for this request (settlements.py).
    settled_first: bool = False
    # InvokeAction / RunCommand: the plugin action this execution runs (plugin_actions.py).
    action: ActionCall | None = None
    # SubmitInteraction answering a suspended agent: the interaction it asked, and what it saved (origin "resume").
    resume: ResumeCall | None = None
    # A submit's admission (services/scheduler/api/admission.py): called with the store's answer when a turn holds the
    # session's lease, before this one waits for it; it returns (queue) or raises (steered, refused).
    when_busy: Callable[[str], Awaitable[None]] | None = None

    @property
    def named_runtime_id(self) -> str:
        """The one runtime a follow-up or RunManual names ("" for a turn that schedules its own, or an action)."""
        if self.detached_job is not None:
            return self.detached_job.runtime_id
        if self.resume is not None:
            return self.resume.record.interaction.runtime_id
        return self.settlement.runtime_id if self.settlement is not None else self.manual_runtime_id

    @property
    def follows_up(self) -> bool:
        """A detached job, a settlement retry or a resume: it runs the runtime a committed turn named, whatever its trigger."""
        return any(one is not None for one in (self.detached_job, self.settlement, self.resume))

    @property
    def runs_one_runtime(self) -> bool:
        """RunManual, an action and a follow-up run one unit alone: no stages, event chain or compaction."""
        return bool(self.manual_runtime_id) or self.action is not None or self.follows_up

    @property
    def source_turn_id(self) -> str:
        """The turn a follow-up follows up ("" otherwise)."""
        if self.detached_job is not None:
            return self.detached_job.turn_id
        if self.resume is not None:
            return self.resume.record.turn_id
        return self.settlement.source_turn_id if self.settlement is not None else ""


@dataclass(eq=False)
class AdvanceStop:
    """Set by Cancel while a submit runs: its turn is cancelled and its auto-advance chain starts no more turns."""

    reason: str = ""

    def set(self, reason: str) -> None:
        self.reason = self.reason or reason

    def is_set(self) -> bool:
        return bool(self.reason)

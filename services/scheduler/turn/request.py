"""What a turn is asked to run (TurnRequest: what every turn shares, and its work, one type per kind of turn), and the
stop a Cancel sets on a submit's turns."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from google.protobuf import struct_pb2

from covel.common.v1 import common_pb2
from covel.store.v1 import store_pb2
from services.scheduler.turn.interaction_answers import ResumeCall
from services.scheduler.turn.plugin_actions import ActionCall
from services.scheduler.turn.retry_seeds import RetrySource
from shared.structs import from_struct, to_struct


@dataclass(frozen=True)
class PlayerTurn:
    """A submit's turn (or a continuation of it): the player's actions; it schedules its runtimes by trigger, stage by stage."""

    actions: list[common_pb2.PlayerAction]


@dataclass(frozen=True)
class ManualRun:
    """RunManual: the one runtime this execution runs, and what the caller hands it."""

    runtime_id: str
    activation: dict


@dataclass(frozen=True)
class DetachedRun:
    """A detached job a worker claimed: this execution runs its runtime on the source turn's snapshot. `ended`: the
    job as the turn's commit ended it (CommitTurnResponse.completed_job), when it did."""

    job: store_pb2.DetachedJob
    ended: list[store_pb2.DetachedJob] = field(default_factory=list, compare=False)

    def job_commit(self, turn: store_pb2.Turn) -> store_pb2.JobCommit:
        """What the turn's commit asks of the job: to end it "succeeded" with its summary when the turn is recorded
        COMMITTED and the job's runtime succeeded (or skipped: nothing to do this time), as the worker would end it."""
        if not job_succeeded(turn, self.job.runtime_id):
            return store_pb2.JobCommit()
        return store_pb2.JobCommit(job_id=self.job.id, job_lease_id=self.job.lease_id, result=to_struct(job_summary(turn, self.job.runtime_id)))

    @property
    def runtime_id(self) -> str:
        return self.job.runtime_id

    @property
    def source_turn_id(self) -> str:
        return self.job.turn_id

    def source_inputs(self) -> dict:
        """The inputs the source turn bound for the job's runtime."""
        return _inputs(self.job.input)

    def activation(self) -> dict:
        """A background runtime's activation payload ({events}); {} for a detached runtime's job."""
        found = from_struct(self.job.input).get("activation")
        return found if isinstance(found, dict) else {}


@dataclass(frozen=True)
class SettlementRetry:
    """A settlement retry: the open receipt whose maintainer this execution runs on the source turn's inputs."""

    receipt: store_pb2.DimensionSettlement

    @property
    def runtime_id(self) -> str:
        return self.receipt.runtime_id

    @property
    def source_turn_id(self) -> str:
        return self.receipt.source_turn_id

    def source_inputs(self) -> dict:
        """The inputs the source turn bound for the maintainer."""
        return _inputs(self.receipt.input)


@dataclass(frozen=True)
class ActionRun:
    """InvokeAction / RunCommand: the plugin action this execution runs (plugin_actions.py)."""

    call: ActionCall


@dataclass(frozen=True)
class ResumeRun:
    """SubmitInteraction answering a suspended agent: the answer as the turn's actions, the interaction it asked and
    what it saved."""

    actions: list[common_pb2.PlayerAction]
    call: ResumeCall

    @property
    def runtime_id(self) -> str:
        return self.call.record.interaction.runtime_id

    @property
    def source_turn_id(self) -> str:
        return self.call.record.turn_id


# It runs the runtime a committed turn named, whatever its trigger.
FollowUp = DetachedRun | SettlementRetry | ResumeRun
# It names the one runtime it runs alone: no stages, event chain or compaction.
NamedRun = ManualRun | FollowUp
TurnWork = PlayerTurn | ActionRun | NamedRun


def named_runtime_id(work: TurnWork) -> str:
    """The one runtime a follow-up or RunManual names ("" for a turn that schedules its own, or an action)."""
    return work.runtime_id if isinstance(work, NamedRun) else ""


@dataclass(frozen=True)
class TurnRequest:
    """What every kind of turn shares; `work` is the kind, with what differs (the runner dispatches on it)."""

    session_id: str
    idempotency_key: str
    work: TurnWork
    origin: str = "player"
    # A submit's turns (its own and its continuations): Cancel stops them, even one still taking its lease.
    stop: AdvanceStop | None = None
    # The kernel already retried the session's open receipts for this request (settlements.py).
    settled_first: bool = False
    # A submit's admission (services/scheduler/api/admission.py): called with the store's answer when a turn holds the
    # session's lease, before this one waits for it; it returns (queue) or raises (steered, refused).
    when_busy: Callable[[str], Awaitable[None]] | None = None
    # A RetryTurn's turn: the version it runs again.
    retry: RetrySource | None = None
    # A detached job's run on its snapshot, the session's lease taken for its commit only (turn/lease_hold.py); False:
    # under the lease from the start (after READ_CONFLICT_RUNS conflicts, detached/worker.py).
    off_lease: bool = False

    @classmethod
    def player(cls, session_id: str, actions: list[common_pb2.PlayerAction], idempotency_key: str, *, origin: str = "player",
               stop: AdvanceStop | None = None, when_busy: Callable[[str], Awaitable[None]] | None = None) -> TurnRequest:
        """A player turn: a submit's (origin "player") or its continuation's."""
        return cls(session_id, idempotency_key, PlayerTurn(actions), origin=origin, stop=stop, when_busy=when_busy)

    @property
    def retried_turn_id(self) -> str:
        """A RetryTurn's turn: the committed turn it runs again (ctx.execution.sourceTurnId); "" otherwise."""
        return self.retry.turn_id if self.retry else ""

    @property
    def source_turn_id(self) -> str:
        """What the turn records as its source: the turn a retry runs again, or the one a follow-up follows."""
        return self.retry.turn_id if self.retry else self.work.source_turn_id if isinstance(self.work, FollowUp) else ""

    @property
    def actions(self) -> list[common_pb2.PlayerAction]:
        """The actions the turn records: a player turn's, or a resume's answer (none for the other kinds)."""
        match self.work:
            case PlayerTurn(actions=actions) | ResumeRun(actions=actions):
                return actions
        return []


def _inputs(source: struct_pb2.Struct) -> dict:
    return from_struct(source).get("inputs") or {}


@dataclass(eq=False)
class AdvanceStop:
    """Set by Cancel while a submit runs: its turn is cancelled and its auto-advance chain starts no more turns."""

    reason: str = ""

    def set(self, reason: str) -> None:
        self.reason = self.reason or reason

    def is_set(self) -> bool:
        return bool(self.reason)


def job_succeeded(turn: store_pb2.Turn, runtime_id: str) -> bool:
    """A detached job's turn is its success: recorded COMMITTED with the job's runtime succeeded or skipped (a guard
    that skips it: nothing to do this time, a job done, not a failure)."""
    result = _result_of(turn, runtime_id)
    return turn.status == store_pb2.TURN_STATUS_COMMITTED and result is not None and result.status in ("success", "skipped")


def job_summary(turn: store_pb2.Turn, runtime_id: str) -> dict:
    """The job's result: its turn, the turn's status and the runtime's."""
    result = _result_of(turn, runtime_id)
    return {"turnId": turn.id, "turnStatus": store_pb2.TurnStatus.Name(turn.status).removeprefix("TURN_STATUS_").lower(),
            "runtimeStatus": result.status if result is not None else "not run"}


def _result_of(turn: store_pb2.Turn, runtime_id: str) -> store_pb2.RuntimeResult | None:
    return next((result for result in turn.runtime_results if result.runtime_id == runtime_id), None)

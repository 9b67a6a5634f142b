"""What one runtime execution produced (RuntimeOutcome), and the records that start one: a subagent
call, a suspended run's resume."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from covel.common.v1 import common_pb2
from services.scheduler.catalogue import Runtime
from services.scheduler.execution.story_output import Story
from services.scheduler.kinds import Visibility


class OutcomeStatus(StrEnum):
    SUCCESS = "success"
    FAILED = "failed"
    SKIPPED = "skipped"
    # Waiting for the player's answer (agent/suspension.py).
    SUSPENDED = "suspended"


class StopReason(StrEnum):
    """Why an agent loop ended (RuntimeOutcome.stop_reason, a subagent's stopReason)."""

    COMPLETED = "completed"
    TOOL_FINISHED = "tool-finished"
    MAX_STEPS = "max-steps"
    DEADLINE = "deadline"
    CONTEXT_OVERFLOW = "context-overflow"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    SUSPENDED = "suspended"
    LOOP_DETECTED = "loop-detected"
    INVALID_OUTPUT = "invalid-output"
    ERROR = "error"


@dataclass
class RuntimeOutcome:
    # A PostRuntime hook may write a status of its own: it is kept as written.
    status: OutcomeStatus | str
    reason: str = ""
    story: Story | None = None
    output: dict[str, Any] = field(default_factory=dict)
    usage: dict[str, int] = field(default_factory=dict)
    trace: list[common_pb2.HookTraceEntry] = field(default_factory=list)
    run_id: str = ""
    # plugin.data writes ({namespace, key, value}) a function runtime proposes.
    writes: list[dict[str, Any]] = field(default_factory=list)
    # Events ({topic, payload}) the runtime emitted; they count only if it succeeds.
    events: list[dict[str, Any]] = field(default_factory=list)
    # Upstream runtimes whose buffered plugin data this runtime read.
    read_from: set[str] = field(default_factory=set)
    # A guard returned {skip: true, ...}: skipped, yet its output binds and its writes commit.
    guard_skipped: bool = False
    # A function's business value as returned (output is its projection).
    canonical_value: Any = None
    has_value: bool = False
    # Why an agent loop ended (completed, tool-finished, max-steps, deadline, timeout, …), and whether
    # the finaliser (tools off, one last request) gave the answer.
    stop_reason: str = ""
    finalizer: bool = False
    # Writes of other plugins' write services this runtime called ({pluginId, type, payload}).
    foreign_writes: list[dict[str, Any]] = field(default_factory=list)
    # What the player is shown (notifications, ui, interactions) and the setup completion signal
    # ("done" / "pending"): HandlerResult's, or an agent's tools' and final output's.
    shown: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    completion: str | None = None
    # status "suspended": what resuming it needs (agent/suspension.py).
    suspension: dict[str, Any] | None = None
    # Failed after a peer outage (outages.py): running it again may succeed.
    retryable: bool = False


def is_story_runtime(runtime: Runtime) -> bool:
    return runtime.visibility == Visibility.STORY


@dataclass
class SubagentCall:
    """A subagent run: the brief is its only user message; no history, hooks or streaming of its own."""

    brief: str
    budget: dict[str, Any] = field(default_factory=dict)
    call_id: str = ""
    parent_runtime_id: str = ""


@dataclass
class Resume:
    """A suspended run's saved state (RuntimeResult.suspension) and the player's answer."""

    state: dict[str, Any]
    answer: dict[str, Any]

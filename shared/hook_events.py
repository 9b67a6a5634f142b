"""The 17 hook events: the one table every part of the kernel reads.

`docs/hooks.md` has one section per event; tests/hooks/test_event_table_doc.py checks that
the document and this table agree, so they cannot drift.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

# The trace statuses of a handler that failed (raised, timed out, returned an invalid result): the fault
# breaker counts them, the metrics count them. "abort" is the plugin doing its job, "ok" its success.
HANDLER_FAULTS = frozenset({"error", "timeout", "invalid-result"})
# Every status a trace entry may have ("skipped": the kernel's own entries for a step that did not run).
HANDLER_STATUSES = ("ok", "abort", "error", "timeout", "invalid-result", "skipped")


class Scope(StrEnum):
    SESSION = "session"
    TURN = "turn"
    RUNTIME = "runtime"


class Mode(StrEnum):
    # Handlers run one after another; each gets the previous one's replace; abort ends the chain.
    SEQUENTIAL = "sequential"
    # Handlers run at the same time; what they return changes nothing.
    PARALLEL = "parallel"


@dataclass(frozen=True)
class HookEvent:
    name: str
    scope: Scope
    mode: Mode
    # A guard event can be blocked; a failing handler blocks it too (fail closed).
    guard: bool
    # The payload fields `replace` may set; anything else is ignored.
    replace_fields: tuple[str, ...]
    # False: the handler's signal fires only on its own timeout, not when the execution is cancelled.
    cancelled_with_execution: bool = True


HOOK_EVENTS: tuple[HookEvent, ...] = (
    HookEvent("SessionStart", Scope.SESSION, Mode.PARALLEL, False, (), cancelled_with_execution=False),
    HookEvent("TurnStart", Scope.TURN, Mode.SEQUENTIAL, True, ()),
    HookEvent("PreCompaction", Scope.TURN, Mode.SEQUENTIAL, True, ()),
    HookEvent("PostCompaction", Scope.TURN, Mode.PARALLEL, False, ()),
    HookEvent("PreSchedule", Scope.TURN, Mode.SEQUENTIAL, False, ("triggered",)),
    HookEvent("PreRuntime", Scope.RUNTIME, Mode.SEQUENTIAL, True, ()),
    HookEvent("PostContextAssembly", Scope.RUNTIME, Mode.SEQUENTIAL, False, ("systemPrompt", "messages")),
    # replace.interjections: messages merged into the run before this step, as Interject's; replace.nextPrompt: a user
    # message before this step's model call (docs/hooks.md).
    HookEvent("PreStep", Scope.RUNTIME, Mode.SEQUENTIAL, False,
              ("tools", "toolChoice", "stepsRemaining", "stop", "interjections", "nextPrompt")),
    # replace.response ({content}) answers the call: the model is not asked (docs/hooks.md); replace.responseStream
    # ({plugin, streamId}) too, its text read through the hooks service's StreamModelAnswer (kernel-internal: run_model_stream).
    HookEvent("PreLLMCall", Scope.RUNTIME, Mode.SEQUENTIAL, False,
              ("messages", "model", "tools", "stream", "response", "responseStream")),
    HookEvent("PostLLMResponse", Scope.RUNTIME, Mode.SEQUENTIAL, False, ("response", "correction")),
    HookEvent("PostRuntime", Scope.RUNTIME, Mode.SEQUENTIAL, False, ("result",)),
    # replace.result answers the call: the tool does not run, the call succeeds with it as data (docs/hooks.md).
    HookEvent("PreToolUse", Scope.RUNTIME, Mode.SEQUENTIAL, True, ("toolCall", "result")),
    HookEvent("PostToolUse", Scope.RUNTIME, Mode.SEQUENTIAL, False, ("result", "terminate")),
    HookEvent("PreStateCommit", Scope.RUNTIME, Mode.SEQUENTIAL, True, ("proposal",)),
    HookEvent("PostStateCommit", Scope.RUNTIME, Mode.PARALLEL, False, (), cancelled_with_execution=False),
    HookEvent("TurnStop", Scope.TURN, Mode.PARALLEL, False, (), cancelled_with_execution=False),
    HookEvent("SessionEnd", Scope.SESSION, Mode.PARALLEL, False, (), cancelled_with_execution=False),
)

EVENTS_BY_NAME: dict[str, HookEvent] = {event.name: event for event in HOOK_EVENTS}
ENFORCE_GROUPS: tuple[str, ...] = ("pre", "normal", "post")
DEFAULT_HOOK_TIMEOUT_MS = 5000

"""The hook events' payloads as typed records, one per event of shared/hook_events.py: a layer builds the record,
the bus sends its wire dict (the contract's camelCase JSON) under the event the record names."""

from __future__ import annotations

from services.scheduler.hooks.payloads.agent_events import PostContextAssembly, PostLLMResponse, PreLLMCall, PreStep
from services.scheduler.hooks.payloads.base import HookPayload
from services.scheduler.hooks.payloads.runtime_events import PostRuntime, PostStateCommit, PreRuntime, PreStateCommit
from services.scheduler.hooks.payloads.session_events import SessionEnd, SessionStart
from services.scheduler.hooks.payloads.tool_events import PostToolUse, PreToolUse
from services.scheduler.hooks.payloads.turn_events import (
    PostCompaction,
    PreCompaction,
    PreSchedule,
    TriggeredRuntime,
    TurnStart,
    TurnStop,
)

# Every record, in the order of shared/hook_events.py.
PAYLOAD_RECORDS: tuple[type[HookPayload], ...] = (
    SessionStart, TurnStart, PreCompaction, PostCompaction, PreSchedule, PreRuntime, PostContextAssembly, PreStep, PreLLMCall,
    PostLLMResponse, PostRuntime, PreToolUse, PostToolUse, PreStateCommit, PostStateCommit, TurnStop, SessionEnd,
)

__all__ = [
    "PAYLOAD_RECORDS", "HookPayload", "PostCompaction", "PostContextAssembly", "PostLLMResponse", "PostRuntime", "PostStateCommit",
    "PostToolUse", "PreCompaction", "PreLLMCall", "PreRuntime", "PreSchedule", "PreStateCommit", "PreStep", "PreToolUse",
    "SessionEnd", "SessionStart", "TriggeredRuntime", "TurnStart", "TurnStop",
]

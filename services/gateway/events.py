"""What a provider attempt yields: deltas while it streams, then exactly one Final."""

from __future__ import annotations

from dataclasses import dataclass, field

from services.gateway.chat import Message, Usage

# Finish reasons, named as in the proto enum without the prefix.
STOP = "stop"
TOOL_CALLS = "tool_calls"
LENGTH = "length"
OTHER = "other"
INTERRUPTED = "interrupted"
ERROR = "error"
FINISH_REASONS = (STOP, TOOL_CALLS, LENGTH, OTHER, INTERRUPTED, ERROR)


@dataclass(frozen=True)
class ContentDelta:
    text: str


@dataclass(frozen=True)
class ToolCallDelta:
    index: int
    id: str = ""
    name: str = ""
    arguments: str = ""


@dataclass(frozen=True)
class Final:
    message: Message
    finish_reason: str
    usage: Usage = field(default_factory=Usage)
    error_message: str = ""
    provider: str = ""
    model: str = ""
    attempts: int = 0
    # Time the stream spent producing output (not counted against the runtime's timeoutMs).
    streamed_ms: int = 0


Event = ContentDelta | ToolCallDelta | Final

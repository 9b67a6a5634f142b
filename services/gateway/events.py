"""What a provider attempt yields: deltas while it streams, then exactly one Final."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from services.gateway.chat import Message, Usage
from shared.stream_coalescing import FLUSH_INTERVAL, MAX_JOINED_CHARS, NEVER, READY_AT_ONCE

# Finish reasons, named as in the proto enum without the prefix.
STOP = "stop"
TOOL_CALLS = "tool_calls"
LENGTH = "length"
OTHER = "other"
INTERRUPTED = "interrupted"
ERROR = "error"
# The request does not fit the model's context window: no model was asked (services/gateway/context_window.py).
CONTEXT_OVERFLOW = "context_overflow"
FINISH_REASONS = (STOP, TOOL_CALLS, LENGTH, OTHER, INTERRUPTED, ERROR, CONTEXT_OVERFLOW)


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
    # The answering model's context window in tokens (its slot's or provider's context_window; 0: not known); with
    # CONTEXT_OVERFLOW, the largest window of the slot's models, and the request's estimated size.
    context_window: int = 0
    prompt_tokens_estimate: int = 0


Event = ContentDelta | ToolCallDelta | Final


def join_deltas(first: Event, then: Event) -> Event | None:
    """Two deltas ready at once as one message: text with text, a tool call's arguments with their next
    piece (within MAX_JOINED_CHARS); None when they go apart. A Final never joins."""
    if isinstance(first, ContentDelta) and isinstance(then, ContentDelta):
        if len(first.text) + len(then.text) <= MAX_JOINED_CHARS:
            return ContentDelta(first.text + then.text)
    elif isinstance(first, ToolCallDelta) and isinstance(then, ToolCallDelta):
        continues = then.index == first.index and not then.id and not then.name
        if continues and len(first.arguments) + len(then.arguments) <= MAX_JOINED_CHARS:
            return replace(first, arguments=first.arguments + then.arguments)
    return None


def how_held(event: Event) -> str:
    """Text may wait the flush interval for more; tool calls join only what is ready at once; the Final never waits."""
    if isinstance(event, ContentDelta):
        return FLUSH_INTERVAL
    return READY_AT_ONCE if isinstance(event, ToolCallDelta) else NEVER

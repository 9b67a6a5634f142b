"""Agent events and their bus (spec: python-hookspecs, "App Hooks 与 Agent 事件"), for code that drives an
agent in process with shared/plugin_sdk/agent_plugins.py.

| event            | hook it carries        | what a handler may set                                  |
|------------------|------------------------|---------------------------------------------------------|
| LLMCallStarted   | before_llm_call        | `request` (rewritten), `decision` (finish)              |
| LLMCallFinished  | after_llm_call         |                                                         |
| ToolCallStarted  | before_tool_call       | `call` (rewritten arguments), `decision`                |
| ToolCallFinished | after_tool_call        |                                                         |
| StepFinished     | continue_prompt        | `next_prompt` (only when `status == "continue"`)        |
| MessagesPending  | provide_steering_inbox | `messages` (drained into the run's next step)           |
| SystemPrompt     | system_prompt          | `parts` (text added to the system prompt)               |

Handlers run in registration order; what one raises reaches `emit()`'s caller (unlike a hookimpl,
which is logged and skipped).
"""

from __future__ import annotations

import inspect
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from shared.plugin_sdk.hookspecs import (
    LLMCallDecision,
    LLMCallRequest,
    LLMCallResult,
    ToolCall,
    ToolCallDecision,
    ToolCallResult,
    TurnState,
)
from shared.plugin_sdk.turn_types import Envelope, StreamState, Tape


@dataclass
class LLMCallStarted:
    request: LLMCallRequest
    state: TurnState
    decision: LLMCallDecision | None = None


@dataclass
class LLMCallFinished:
    request: LLMCallRequest
    result: LLMCallResult
    state: TurnState


@dataclass
class ToolCallStarted:
    call: ToolCall
    state: TurnState
    decision: ToolCallDecision | None = None


@dataclass
class ToolCallFinished:
    call: ToolCall
    result: ToolCallResult
    state: TurnState


@dataclass
class StepFinished:
    prompt: str | list[dict] | None
    tape: Tape
    state: StreamState
    status: str = "continue"
    next_prompt: str | None = None


@dataclass
class MessagesPending:
    session_id: str
    messages: list[Envelope] = field(default_factory=list)


@dataclass
class SystemPrompt:
    prompt: str | list[dict]
    state: TurnState
    parts: list[str] = field(default_factory=list)


class EventBus:
    """Handlers by event type, run in registration order; plain or async."""

    def __init__(self) -> None:
        self._handlers: defaultdict[type, list[Callable[[Any], Any]]] = defaultdict(list)

    def on(self, event_type: type, handler: Callable[[Any], Any]) -> None:
        self._handlers[event_type].append(handler)

    def handlers(self, event_type: type) -> list[Callable[[Any], Any]]:
        return list(self._handlers.get(event_type, ()))

    async def emit(self, event: Any) -> Any:
        """Every handler of the event's type, one after another; the event as they left it."""
        for handler in self.handlers(type(event)):
            outcome = handler(event)
            if inspect.isawaitable(outcome):
                await outcome
        return event

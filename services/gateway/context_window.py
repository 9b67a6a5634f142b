"""A request against its models' context windows (ProviderConfig.context_window, the operator's setting).

Before a call the gateway estimates the request's size (shared/model_context.py: messages and tool
definitions) and drops from the slot's chain every model whose window it exceeds; with none left, the call
answers at once with a Final of finish reason context_overflow, naming the largest window and the estimate, and
no provider is asked. A provider that refuses a request as too long (HTTP 400 with `context_length_exceeded`,
or its "maximum context length" message) ends the call the same way, its window unknown (0). The scheduler's
context-overflow finalizer reads this Final (services/scheduler/agent/context_overflow.py).
"""

from __future__ import annotations

import json

from services.gateway import events
from services.gateway.chat import Call, Message
from services.gateway.events import Final
from services.gateway.slots import Target
from shared.model_context import request_tokens

# What an OpenAI-compatible provider's refusal of a too-long request says (its error code, or its message).
OVERFLOW_MARKERS = ("context_length_exceeded", "maximum context length", "context window", "too many tokens")


def call_tokens(call: Call) -> int:
    messages = [[m.content, *(f"{t.name} {t.arguments}" for t in m.tool_calls)] for m in call.messages]
    tools = [json.dumps({"name": t.name, "description": t.description, "parameters": t.parameters}) for t in call.tools]
    return request_tokens(messages, tools)


def fitting(chain: tuple[Target, ...], tokens: int) -> tuple[Target, ...]:
    """The models of the chain the request fits (a model with no known window always does)."""
    return tuple(target for target in chain if not target.window or tokens <= target.window)


def overflow(chain: tuple[Target, ...], tokens: int) -> Final:
    """The answer when no model of the chain fits the request."""
    window = max(target.window for target in chain)
    labels = ", ".join(f"{t.label} ({t.window})" for t in chain)
    return Final(
        message=Message(role="assistant"),
        finish_reason=events.CONTEXT_OVERFLOW,
        error_message=f"the request (about {tokens} tokens) fits no model's context window: {labels}",
        provider=chain[0].provider.name,
        model=chain[0].model,
        context_window=window,
        prompt_tokens_estimate=tokens,
    )


def refused_as_too_long(status: int | None, reason: str) -> bool:
    """A provider's 400 (or 413) that says the request is longer than the model's context."""
    lowered = reason.lower()
    return status in (400, 413) and any(marker in lowered for marker in OVERFLOW_MARKERS)


def provider_overflow(target: Target, tokens: int, reason: str) -> Final:
    return Final(
        message=Message(role="assistant"),
        finish_reason=events.CONTEXT_OVERFLOW,
        error_message=f"{target.label} refused the request as longer than its context: {reason}",
        provider=target.provider.name,
        model=target.model,
        context_window=target.window,
        prompt_tokens_estimate=tokens,
    )

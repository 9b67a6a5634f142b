"""The provider interface and how a failed attempt is reported."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

import grpc

from services.gateway.chat import Call, Usage
from services.gateway.events import Event
from services.gateway.slots import Target


@dataclass(frozen=True)
class AttemptLimits:
    """Time limits of one attempt, in seconds (already capped by the call's budget)."""

    call_timeout_s: float
    first_token_timeout_s: float
    idle_timeout_s: float
    connect_timeout_s: float


@dataclass
class AttemptFailed(Exception):
    """An attempt that produced no output. Retryable ones may be retried or fall back."""

    reason: str
    retryable: bool
    status: int = 0
    retry_after_s: float | None = None
    # For non-retryable failures: the gRPC status the caller gets.
    code: grpc.StatusCode = grpc.StatusCode.UNAVAILABLE

    def __str__(self) -> str:
        return self.reason


class Provider(Protocol):
    def attempt(self, call: Call, target: Target, *, slot: str, stream: bool, limits: AttemptLimits) -> AsyncIterator[Event]:
        """Yield deltas (streamed calls) and exactly one Final, or raise AttemptFailed before any output.

        A failure after output has been yielded ends with a Final whose finish reason is
        "interrupted", never with an exception.
        """
        ...

    async def aclose(self) -> None: ...


_TOKEN = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def approx_tokens(text: str) -> int:
    """A rough token count (words and punctuation) for providers that report none."""
    return len(_TOKEN.findall(text))


def approx_usage(call: Call, completion: str) -> Usage:
    prompt = sum(approx_tokens(m.content) + sum(approx_tokens(t.arguments) for t in m.tool_calls) + 3 for m in call.messages)
    return Usage(prompt_tokens=prompt, completion_tokens=approx_tokens(completion))

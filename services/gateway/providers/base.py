"""The provider interface and how a failed attempt is reported."""

from __future__ import annotations

import functools
import math
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
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
    # Time left on the call's clock, read while waiting for the next output: silence counts
    # against it, so a stream quiet for longer than this ends even before idle_timeout_s.
    time_left_s: Callable[[], float] = field(default=lambda: math.inf)

    def silence_limit_s(self) -> float:
        return max(0.001, min(self.idle_timeout_s, self.time_left_s()))


# What kind of failure an attempt met; calls.py decides retries and fallbacks from it.
TRANSPORT = "transport"  # connect errors, a break before output, 429, 5xx: retried with backoff
STALL = "stall"  # no first output / no reply within the attempt's time: retried at once, uses up maxRetries
GENERATION = "generation"  # the provider reported a generation error before any output: like a stall
REJECTED = "rejected"  # other 4xx: never retried


@dataclass
class AttemptFailed(Exception):
    """An attempt that produced no output. Retryable ones may be retried or fall back."""

    reason: str
    retryable: bool
    status: int = 0
    retry_after_s: float | None = None
    # For non-retryable failures: the gRPC status the caller gets.
    code: grpc.StatusCode = grpc.StatusCode.UNAVAILABLE
    kind: str = ""

    def __post_init__(self) -> None:
        if not self.kind:
            self.kind = TRANSPORT if self.retryable else REJECTED

    @property
    def allows_fallback(self) -> bool:
        """Only a provider that answered 429 or 5xx is given up for the next model."""
        return self.status == 429 or self.status >= 500

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


@functools.lru_cache(maxsize=2048)
def approx_tokens(text: str) -> int:
    """A rough token count (words and punctuation) for providers that report none. Kept per text: a session's calls
    send the same history again and again, and counting it took a tenth of the gateway's CPU on the scripted model."""
    return len(_TOKEN.findall(text))


def approx_usage(call: Call, completion: str) -> Usage:
    prompt = sum(approx_tokens(m.content) + sum(approx_tokens(t.arguments) for t in m.tool_calls) + 3 for m in call.messages)
    return Usage(prompt_tokens=prompt, completion_tokens=approx_tokens(completion))

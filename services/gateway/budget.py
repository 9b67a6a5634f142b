"""The budget of one logical call (attempts and time, shared by retries and fallbacks),
the waits between attempts, and the per-attempt time limits.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

FIRST_TOKEN_CAP_S = 120.0
FIRST_TOKEN_FLOOR_S = 60.0
# Less time than this left in the call's budget: no new attempt starts.
MIN_ATTEMPT_S = 0.01


def first_token_wait(remaining_s: float, attempts_left: int) -> float:
    """How long one streamed attempt waits for its first output when the caller set no limit.

    Spec (流式调用的等待时限): an attempt waits at most 120 s and leaves time for the
    retries maxRetries still allows. The last attempt may use all the time left; earlier
    ones wait remaining / attempts left, raised to 60 s when below that but never more than
    half the time left.
    """
    if remaining_s <= 0:
        return 0.0
    if attempts_left <= 1:
        return remaining_s
    wait = remaining_s / attempts_left
    if wait < FIRST_TOKEN_FLOOR_S:
        wait = min(FIRST_TOKEN_FLOOR_S, remaining_s / 2)
    return min(wait, FIRST_TOKEN_CAP_S)


def first_token_waits(timeout_s: float, max_retries: int) -> list[float]:
    """The waits of every attempt when each one stalls: the spec's table.

    120 s with maxRetries 3 gives 60, 30, 15, 15; 240 s with maxRetries 1 gives 120, 120.
    """
    waits, remaining = [], timeout_s
    for attempts_left in range(max_retries + 1, 0, -1):
        wait = first_token_wait(remaining, attempts_left)
        waits.append(wait)
        remaining -= wait
    return waits


def backoff_delay(retry_index: int, base_s: float, cap_s: float, rng: random.Random | None = None) -> float:
    """Exponential backoff with jitter: between half and all of base * 2^n, capped."""
    ceiling = min(cap_s, base_s * (2**retry_index))
    return ceiling * (0.5 + 0.5 * (rng or random).random())


def parse_retry_after(value: str | None) -> float | None:
    """Retry-After in seconds (the HTTP-date form is read too)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    from email.utils import parsedate_to_datetime

    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, moment.timestamp() - time.time())


@dataclass
class Budget:
    """One logical call's budget: HTTP attempts, and time on the runtime's clock.

    The clock is the runtime's timeoutMs (or the gateway's default budget). Waiting counts
    against it; time while a stream produces output does not (`credit_streaming`), so the
    soft deadline moves on by that much. The caller's gRPC deadline (`hard_deadline`) never
    moves.
    """

    max_attempts: int
    deadline: float  # time.monotonic() value, moved on by streaming time
    hard_deadline: float | None = None
    used: int = 0
    streamed_s: float = 0.0
    started: float = field(default_factory=time.monotonic)

    @classmethod
    def start(cls, max_attempts: int, budget_s: float, caller_remaining_s: float | None) -> Budget:
        now = time.monotonic()
        hard = None if caller_remaining_s is None else now + max(0.0, caller_remaining_s)
        return cls(max_attempts=max(1, max_attempts), deadline=now + max(0.0, budget_s), hard_deadline=hard)

    @property
    def remaining_s(self) -> float:
        end = self.deadline if self.hard_deadline is None else min(self.deadline, self.hard_deadline)
        return max(0.0, end - time.monotonic())

    @property
    def attempts_left(self) -> int:
        return max(0, self.max_attempts - self.used)

    def exhausted(self) -> bool:
        # An attempt with next to no time left could only time out at once (and read as a stall).
        return self.attempts_left == 0 or self.remaining_s <= MIN_ATTEMPT_S

    def take_attempt(self) -> int:
        self.used += 1
        return self.used

    def credit_streaming(self, seconds: float) -> None:
        """Time spent producing output: not counted against the runtime's clock."""
        if seconds > 0:
            self.streamed_s += seconds
            self.deadline += seconds

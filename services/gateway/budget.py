"""The budget of one logical call (attempts and time, shared by retries and fallbacks),
the waits between attempts, and the per-attempt time limits.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

FIRST_TOKEN_CAP_S = 120.0
FIRST_TOKEN_FLOOR_S = 60.0


def first_token_wait(remaining_s: float, attempts_left: int) -> float:
    """How long one streamed attempt waits for its first output when the caller set no limit.

    Spec (流式调用的等待时限): at most 120 s; the last attempt may use all the time left;
    earlier ones wait remaining / attempts left, raised to 60 s when below that but never
    more than half the time left. 120 s with 3 retries gives 60, 30, 15, 15.
    """
    if remaining_s <= 0:
        return 0.0
    if attempts_left <= 1:
        return min(remaining_s, FIRST_TOKEN_CAP_S)
    wait = remaining_s / attempts_left
    if wait < FIRST_TOKEN_FLOOR_S:
        wait = min(FIRST_TOKEN_FLOOR_S, remaining_s / 2)
    return min(wait, FIRST_TOKEN_CAP_S)


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
    max_attempts: int
    deadline: float  # time.monotonic() value
    used: int = 0
    started: float = field(default_factory=time.monotonic)

    @classmethod
    def start(cls, max_attempts: int, budget_s: float, caller_remaining_s: float | None) -> Budget:
        seconds = budget_s if caller_remaining_s is None else min(budget_s, caller_remaining_s)
        return cls(max_attempts=max(1, max_attempts), deadline=time.monotonic() + max(0.0, seconds))

    @property
    def remaining_s(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    @property
    def attempts_left(self) -> int:
        return max(0, self.max_attempts - self.used)

    def exhausted(self) -> bool:
        return self.attempts_left == 0 or self.remaining_s <= 0

    def take_attempt(self) -> int:
        self.used += 1
        return self.used

"""Pause a plugin's hooks for a session after repeated faults.

Faults are handlers that raised, timed out or returned an invalid result; an abort or veto
is the plugin doing its job and does not count, nor does a cancelled parent (its handlers
never report). Past `threshold` faults within `window_s`, the plugin's hooks stop running
for that session from the next execution on: the execution that tripped the breaker keeps
its frozen plugin set.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

FAULT_STATUSES = frozenset({"error", "timeout", "invalid-result"})


@dataclass(frozen=True)
class Pause:
    plugin_id: str
    reason: str
    faults: int
    paused_at: float
    # The execution that tripped the breaker; it keeps running the plugin's hooks.
    turn_id: str


class FaultBreaker:
    def __init__(self, threshold: int, window_s: float, clock=time.time) -> None:
        self._threshold = threshold
        self._window_s = window_s
        self._clock = clock
        self._faults: dict[tuple[str, str], deque[float]] = {}
        self._paused: dict[tuple[str, str], Pause] = {}

    def record(self, session_id: str, turn_id: str, plugin_id: str, status: str, message: str) -> None:
        if status not in FAULT_STATUSES:
            return
        key = (session_id, plugin_id)
        if key in self._paused:
            return
        now = self._clock()
        window = self._faults.setdefault(key, deque())
        window.append(now)
        while window and window[0] < now - self._window_s:
            window.popleft()
        if len(window) >= self._threshold:
            reason = (
                f"{len(window)} hook faults within {self._window_s:.0f} s (last: {status}: {message}); "
                "its hooks are paused for this session until reset"
            )
            self._paused[key] = Pause(plugin_id, reason, len(window), now, turn_id)
            window.clear()

    def excluded(self, session_id: str, turn_id: str, plugin_ids: Iterable[str]) -> set[str]:
        """Plugins whose hooks must not run in this execution."""
        excluded = set()
        for plugin_id in plugin_ids:
            pause = self._paused.get((session_id, plugin_id))
            if pause is not None and (not turn_id or pause.turn_id != turn_id):
                excluded.add(plugin_id)
        return excluded

    def paused(self, session_id: str) -> list[Pause]:
        return [pause for (session, _), pause in self._paused.items() if session == session_id]

    def reset(self, session_id: str, plugin_id: str) -> bool:
        self._faults.pop((session_id, plugin_id), None)
        return self._paused.pop((session_id, plugin_id), None) is not None

"""Wake a turn waiting for a session's lease when this store lets the session go, instead of at its next poll.

A turn that finds the session busy (its lease held, a player's turn ahead of a detached job, the detached queue
full) waits and asks again (services/store/leases.py). Whatever can end that wait in this store process (a
commit or a release of the session's lease, a detached job of the session completing) wakes the session's
waiters at once, so a waiter asks again when the answer may have changed rather than on a clock. The store keeps
two of these (services/store/server.py): players' turns are woken whenever the session may be free; detached jobs
and settlements not after a player's turn (its player may act at once, and goes first: they find the session free
at their next poll, every 0.25 s), but after the session's background work and when the session ends. The polls
remain, for what another store replica changes and for a lease that lapses; a detached job no longer polls
faster at first (20-160 ms), and a player's turn keeps its fast polls (each renews its place ahead of the jobs).

Everything here runs on the store's event loop: a waiter takes its ticket before it asks, so a wakeup between
its question and its wait is not lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator


def give_up_at(wait_ms: int, time_remaining_s: float | None) -> float:
    """When (time.monotonic()) a waiting call stops waiting: after `wait_ms`, or just before the caller's deadline, so
    it answers itself (ABORTED, an empty answer) rather than let the deadline expire on it."""
    wait_s = wait_ms / 1000
    if time_remaining_s is not None:
        wait_s = max(0.0, min(wait_s, time_remaining_s - 0.1))
    return time.monotonic() + wait_s


class LeaseWakeups:
    def __init__(self) -> None:
        self._events: dict[str, asyncio.Event] = {}
        # Waiters per session: a session's event is dropped once nobody waits for it.
        self._watchers: dict[str, int] = {}
        # Players' turns waiting for a session, in arrival order: only the first asks (several players at one table
        # take turns in the order they submitted; docs/api.md "Seats").
        self._lines: dict[str, list[object]] = {}

    @contextlib.contextmanager
    def watching(self, session_id: str) -> Iterator[None]:
        """Around one acquire's asks and waits for the session."""
        self._watchers[session_id] = self._watchers.get(session_id, 0) + 1
        try:
            yield
        finally:
            left = self._watchers.pop(session_id) - 1
            if left:
                self._watchers[session_id] = left
            else:
                self._events.pop(session_id, None)

    def ticket(self, session_id: str) -> asyncio.Event:
        """Taken (inside `watching`) before asking for the lease; set by the next `wake(session_id)`."""
        event = self._events.get(session_id)
        if event is None:
            event = self._events[session_id] = asyncio.Event()
        return event

    def wake(self, session_id: str) -> None:
        event = self._events.pop(session_id, None)
        if event is not None:
            event.set()

    @staticmethod
    async def wait(ticket: asyncio.Event, timeout_s: float) -> bool:
        """Until the ticket's wakeup or `timeout_s`; whether it was woken."""
        try:
            await asyncio.wait_for(ticket.wait(), timeout_s)
        except TimeoutError:
            return False
        return True

    @contextlib.contextmanager
    def in_line(self, session_id: str) -> Iterator[Callable[[], bool]]:
        """A player's turn waiting for the session, behind those that came before it: yields whether it is first now.
        Leaving the line (the lease taken, or the wait given up) lets the next one ask at once."""
        place = object()
        line = self._lines.setdefault(session_id, [])
        line.append(place)
        try:
            yield lambda: line[0] is place
        finally:
            line.remove(place)
            if not line:
                del self._lines[session_id]
            else:
                self.wake(session_id)

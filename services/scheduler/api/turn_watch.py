"""WatchTurn: reattach to a turn's events, from the replica that runs it or from any other.

Every turn streamed on this replica is kept here as it happens (its events from turn_started on)
and for a while after it ends, so a client that lost its stream reads it again from the start
and then follows it live. A turn this replica does not run is followed through the store: the
watcher waits until its record is committed, then gets it replayed (turn_started, the story as
narrative_delta, the interactions, notifications and UI blocks it showed, turn_completed).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from covel.scheduler.internal.v1 import turn_events_pb2
from covel.store.v1 import store_pb2

# How long a finished turn's live events stay here; later, watchers get the replay from the record.
KEPT_S = 120.0
KEPT_TURNS = 512


@dataclass
class WatchedTurn:
    session_id: str
    turn_id: str
    events: list[turn_events_pb2.TurnEvent] = field(default_factory=list)
    done: bool = False
    ended_at: float = 0.0
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def add(self, event: turn_events_pb2.TurnEvent) -> None:
        self.events.append(event)
        if event.WhichOneof("event") == "turn_completed":
            self.end()
        self._wake()

    def end(self) -> None:
        if not self.done:
            self.done, self.ended_at = True, time.monotonic()
            self._wake()

    def _wake(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()

    async def follow(self) -> AsyncIterator[turn_events_pb2.TurnEvent]:
        """Every event from the first, then each as it comes, until the turn ends."""
        sent = 0
        while True:
            changed = self.changed
            while sent < len(self.events):
                yield self.events[sent]
                sent += 1
            if self.done:
                return
            await changed.wait()


class TurnWatch:
    """The turns streamed on this replica, by turn id and by session (its latest)."""

    def __init__(self) -> None:
        self._turns: OrderedDict[str, WatchedTurn] = OrderedDict()
        self._latest: dict[str, str] = {}
        # Set (and replaced) when a turn of the session starts here: WatchSession waits on it.
        self._began: dict[str, asyncio.Event] = {}

    def tap(self, session_id: str) -> tuple[Callable[[turn_events_pb2.TurnEvent], None], Callable[[], None]]:
        """What a stream of `session_id` passes each event to (a chain of turns: one WatchedTurn each)."""
        current: list[WatchedTurn] = []

        def publish(event: turn_events_pb2.TurnEvent) -> None:
            if event.WhichOneof("event") == "turn_started":
                if current:
                    current[0].end()
                current[:] = [self._start(session_id, event.turn_started.turn_id)]
            if current:
                current[0].add(event)

        def close() -> None:
            if current:
                current[0].end()  # the stream ended (an error, a cancelled chain): its turn has no more events

        return publish, close

    def running_or_kept(self, session_id: str, turn_id: str) -> WatchedTurn | None:
        self._forget_old()
        return self._turns.get(turn_id or self._latest.get(session_id, ""))

    def running(self, session_id: str) -> WatchedTurn | None:
        """The session's turn running on this replica, if one is."""
        watched = self.running_or_kept(session_id, "")
        return watched if watched is not None and not watched.done else None

    def next_start(self, session_id: str) -> asyncio.Event:
        """Set when the session's next turn starts on this replica (drop it after: one is kept per waiting session)."""
        return self._began.setdefault(session_id, asyncio.Event())

    def _start(self, session_id: str, turn_id: str) -> WatchedTurn:
        self._forget_old()
        watched = self._turns[turn_id] = WatchedTurn(session_id, turn_id)
        self._latest[session_id] = turn_id
        began = self._began.pop(session_id, None)
        if began is not None:
            began.set()
        return watched

    def _forget_old(self) -> None:
        now = time.monotonic()
        while self._turns:
            turn_id, oldest = next(iter(self._turns.items()))
            if len(self._turns) <= KEPT_TURNS and not (oldest.done and now - oldest.ended_at > KEPT_S):
                return
            del self._turns[turn_id]
            if self._latest.get(oldest.session_id) == turn_id:
                del self._latest[oldest.session_id]


def replay(turn: store_pb2.Turn) -> list[turn_events_pb2.TurnEvent]:
    """A recorded turn as the events a watcher gets: the story, what it showed the player, the record."""
    events = [turn_events_pb2.TurnEvent(turn_started=turn_events_pb2.TurnStarted(turn_id=turn.id, logical_turn=turn.logical_turn,
                                                                                actions=turn.actions))]
    events.extend(turn_events_pb2.TurnEvent(narrative_delta=turn_events_pb2.NarrativeDelta(runtime_id=message.runtime_id, text=message.text))
                  for message in turn.messages if message.role == "story" and message.text)
    for result in turn.runtime_results:
        events.extend(turn_events_pb2.TurnEvent(notification=shown) for shown in result.notifications)
        events.extend(turn_events_pb2.TurnEvent(ui=shown) for shown in result.ui)
        events.extend(turn_events_pb2.TurnEvent(interaction=shown) for shown in result.interactions)
    events.append(turn_events_pb2.TurnEvent(turn_completed=turn))
    return events

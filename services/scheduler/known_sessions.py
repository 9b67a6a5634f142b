"""The sessions this replica's turns found with their leases, newest first out of mind last.

What a turn's own events need of its session (its active plugins, to skip an event key nobody in
it hears; its locale and approvals, for the hook context) is what its lease answered: reading the
session again from the store for each event would cost a round trip per event.
"""

from __future__ import annotations

from collections import OrderedDict

from covel.store.v1 import store_pb2

# Sessions remembered; past it the oldest go (an event of one of those reads it from the store).
REMEMBERED = 10_000


class KnownSessions:
    def __init__(self, capacity: int = REMEMBERED) -> None:
        self._capacity = capacity
        self._sessions: OrderedDict[str, store_pb2.Session] = OrderedDict()

    def note(self, session: store_pb2.Session) -> None:
        self._sessions[session.id] = session
        self._sessions.move_to_end(session.id)
        if len(self._sessions) > self._capacity:
            self._sessions.popitem(last=False)

    def get(self, session_id: str) -> store_pb2.Session | None:
        return self._sessions.get(session_id)

    def forget(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)

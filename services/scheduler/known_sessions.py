"""The sessions this replica's turns found with their leases, the ones used last kept.

What a turn's own events need of its session (its active plugins, to skip an event key nobody in
it hears; its locale and approvals, for the hook context) is what its lease answered: reading the
session again from the store for each event would cost a round trip per event.
"""

from __future__ import annotations

from covel.store.v1 import store_pb2
from services.scheduler.recently_used import RecentlyUsed

# Sessions remembered; past it the oldest go (an event of one of those reads it from the store).
REMEMBERED = 10_000


class KnownSessions(RecentlyUsed[str, store_pb2.Session]):
    def __init__(self, capacity: int = REMEMBERED) -> None:
        super().__init__(capacity)

    def note(self, session: store_pb2.Session) -> None:
        self.put(session.id, session)

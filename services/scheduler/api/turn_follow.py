"""A turn's events followed: live while it runs on this replica, else its record replayed, once recorded
(a turn another replica runs is waited for: GetRunningTurn, then GetTurn)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc

from covel.scheduler.v1 import scheduler_pb2
from covel.store.v1 import store_pb2, store_pb2_grpc
from services.scheduler.api.turn_watch import TurnWatch, replay
from services.scheduler.public_api import convert
from services.scheduler.turn.concealment import conceal_turn
from shared.errors import not_found

# How often WatchTurn on a replica that does not run the turn looks for its record.
WATCH_POLL_S = 0.25


class TurnFollower:
    def __init__(self, store: store_pb2_grpc.TransactionalStoreStub, watch: TurnWatch) -> None:
        self._store = store
        self._watch = watch

    async def followed(self, session_id: str, turn_id: str) -> AsyncIterator[scheduler_pb2.TurnEvent]:
        """The turn's events (the session's latest turn without `turn_id`): live while it runs here, else its record replayed."""
        watched = self._watch.running_or_kept(session_id, turn_id)
        if watched is not None and watched.session_id == session_id:
            async for event in watched.follow():
                yield convert(event, scheduler_pb2.TurnEvent)
            return
        turn = await self._followed_elsewhere(session_id, turn_id)
        for event in replay(conceal_turn(turn)):
            yield convert(event, scheduler_pb2.TurnEvent)

    async def _followed_elsewhere(self, session_id: str, turn_id: str) -> store_pb2.Turn:
        """The turn once recorded: one running on another replica is waited for (its record polled)."""
        store = self._store
        running = (await store.GetRunningTurn(store_pb2.GetRunningTurnRequest(session_id=session_id))).turn_id
        if not turn_id and not running:
            latest = await store.ListTurns(store_pb2.ListTurnsRequest(session_id=session_id, page_size=1, newest_first=True))
            if not latest.turns:
                raise not_found(f"session {session_id} has no turn yet; submit one", "covel.scheduler.v1.Turn", "", reason="TURN_NOT_FOUND")
            return latest.turns[0]
        wanted = turn_id or running
        while True:
            recorded = await self._recorded(session_id, wanted)
            if recorded is not None:
                return recorded
            if (await store.GetRunningTurn(store_pb2.GetRunningTurnRequest(session_id=session_id))).turn_id != wanted:
                # Not running (any more): recorded just now, or never (its scheduler stopped mid-turn).
                recorded = await self._recorded(session_id, wanted)
                if recorded is None:
                    raise not_found(f"turn {wanted} of session {session_id} is neither recorded nor running", "covel.scheduler.v1.Turn", wanted,
                                    reason="TURN_NOT_FOUND")
                return recorded
            await asyncio.sleep(WATCH_POLL_S)

    async def _recorded(self, session_id: str, turn_id: str) -> store_pb2.Turn | None:
        try:
            return (await self._store.GetTurn(store_pb2.GetTurnRequest(session_id=session_id, turn_id=turn_id))).turn
        except grpc.aio.AioRpcError as error:
            if error.code() != grpc.StatusCode.NOT_FOUND:
                raise
            return None

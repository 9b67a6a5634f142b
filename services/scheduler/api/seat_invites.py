"""Several players in one story (docs/api.md, "Seats"): InviteToSeat, JoinSeat, RevokeSeat and WatchSession.

The session's owner (or an operator) invites a signed-in player to one of the session's seats other than `main`: the
answer is a one-time grant, `<session id>.<secret>`, shown once; the store keeps only the secret's SHA-256 with its
expiry (services/store/seat_grants.py). Whoever shows the grant first takes the seat (JoinSeat: any authenticated
principal but the owner); the owner revokes a seat's open grant and its guest at any time (RevokeSeat). A guest then
reads the session and plays its own seat (services/scheduler/session_access.py GUEST_METHODS); its submits queue with
the owner's through the session's lease in the order they came (services/store/lease_wakeups.py `in_line`), and each
turn's turn_started names the actions and seats it answers. WatchSession follows every turn of the session, whoever
submitted it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import secrets
import time
from collections.abc import AsyncIterator

import grpc
from google.protobuf import timestamp_pb2

from covel.scheduler.v1 import scheduler_pb2
from covel.store.v1 import store_pb2, store_pb2_grpc
from services.scheduler.api.turn_follow import WATCH_POLL_S, TurnFollower
from services.scheduler.api.turn_watch import TurnWatch
from services.scheduler.public_api import respond
from shared.errors import ServiceError, invalid_argument, require, rpc
from shared.security.auth import caller

DEFAULT_TTL_S = 86_400
MAX_TTL_S = 7 * 86_400


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _grant_parts(grant: str) -> tuple[str, str]:
    session_id, _, secret = grant.strip().partition(".")
    if not session_id or len(secret) < 16:
        raise invalid_argument("grant", "is not an invitation: pass the whole grant InviteToSeat returned (<session id>.<secret>)")
    return session_id, secret


class SeatInvites:
    def __init__(self, store: store_pb2_grpc.TransactionalStoreStub, follower: TurnFollower, watch: TurnWatch) -> None:
        self._store = store
        self._follower = follower
        self._watch = watch

    @rpc
    async def InviteToSeat(self, request: scheduler_pb2.InviteToSeatRequest, context: grpc.aio.ServicerContext) -> scheduler_pb2.InviteToSeatResponse:
        require(request.session_id, "session_id", "the id CreateSession returned")
        require(request.seat_id, "seat_id", "one of the session's seats other than main (ListActionKinds lists them)")
        if not 0 <= request.ttl_s <= MAX_TTL_S:
            raise invalid_argument("ttl_s", f"is {request.ttl_s}; 1 to {MAX_TTL_S} seconds, or 0 for a day")
        secret = secrets.token_urlsafe(24)
        expires_at = timestamp_pb2.Timestamp()
        expires_at.FromSeconds(int(time.time()) + (request.ttl_s or DEFAULT_TTL_S))
        await self._store.GrantSeat(store_pb2.GrantSeatRequest(session_id=request.session_id, seat_id=request.seat_id,
                                                               secret_digest=_digest(secret), expires_at=expires_at))
        return scheduler_pb2.InviteToSeatResponse(grant=f"{request.session_id}.{secret}", seat_id=request.seat_id, expires_at=expires_at)

    @rpc
    async def JoinSeat(self, request: scheduler_pb2.JoinSeatRequest, context: grpc.aio.ServicerContext) -> scheduler_pb2.JoinSeatResponse:
        require(request.grant, "grant", "the invitation the session's owner gave you")
        session_id, secret = _grant_parts(request.grant)
        try:
            joined = await self._store.RedeemSeatGrant(store_pb2.RedeemSeatGrantRequest(
                session_id=session_id, secret_digest=_digest(secret), principal=caller().name))
        except grpc.aio.AioRpcError as error:
            if error.code() == grpc.StatusCode.NOT_FOUND:  # a made-up session id: the same answer as a spent grant
                raise ServiceError(grpc.StatusCode.PERMISSION_DENIED, "the invitation is not valid: it was used, revoked, or replaced "
                                   "by a newer one; ask the session's owner for a new one", reason="SEAT_GRANT_INVALID") from None
            raise
        return respond(scheduler_pb2.JoinSeatResponse, session=joined.session, seat_id=joined.seat_id)

    @rpc
    async def RevokeSeat(self, request: scheduler_pb2.RevokeSeatRequest, context: grpc.aio.ServicerContext) -> scheduler_pb2.RevokeSeatResponse:
        require(request.session_id, "session_id", "the id CreateSession returned")
        require(request.seat_id, "seat_id", "the seat whose invitation and guest end")
        reply = await self._store.RevokeSeat(store_pb2.RevokeSeatRequest(session_id=request.session_id, seat_id=request.seat_id))
        return respond(scheduler_pb2.RevokeSeatResponse, session=reply.session)

    @rpc
    async def WatchSession(self, request: scheduler_pb2.WatchSessionRequest, context: grpc.aio.ServicerContext) -> AsyncIterator[scheduler_pb2.TurnEvent]:
        """Every turn from the running one on: live where it runs here; one another replica runs, once recorded."""
        require(request.session_id, "session_id", "the id CreateSession returned")
        session_id = request.session_id
        recorded = await self._recorded(session_id)  # NOT_FOUND for a missing one; what was played before is ListTurns'
        followed: set[str] = set()
        while True:
            began = self._watch.next_start(session_id)
            turn_id = await self._running(session_id)
            if not turn_id and (now := await self._recorded(session_id)) != recorded:
                recorded, turn_id = now, await self._latest_recorded(session_id)
            if turn_id and turn_id not in followed:
                followed.add(turn_id)
                async for event in self._follower.followed(session_id, turn_id):
                    yield event
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(began.wait(), WATCH_POLL_S)

    async def _running(self, session_id: str) -> str:
        local = self._watch.running(session_id)
        if local is not None:
            return local.turn_id
        return (await self._store.GetRunningTurn(store_pb2.GetRunningTurnRequest(session_id=session_id))).turn_id

    async def _recorded(self, session_id: str) -> int:
        return (await self._store.GetSession(store_pb2.GetSessionRequest(session_id=session_id))).session.recorded_turns

    async def _latest_recorded(self, session_id: str) -> str:
        """The newest recorded turn's id ("" before the first): a turn another replica ran between two looks."""
        newest = await self._store.ListTurns(store_pb2.ListTurnsRequest(session_id=session_id, page_size=1, newest_first=True))
        return newest.turns[0].id if newest.turns else ""

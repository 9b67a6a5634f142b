"""The story's moves: RetryTurn (regenerate, edit, delete and re-run), ListTurnVersions, SelectTurnVersion,
RewindSession, BranchSession. Who may call them: the session's owner or an operator, like every session RPC
(services/scheduler/session_access.py checks the request's session_id before it runs).

The store keeps the story's line and does each move in one transaction (services/store/story_line.py); a retry
is a turn whose lease moves the line back one turn first, so it runs on the state the turn before left.
Continuing the story without player input is no move of its own: it is SubmitActions with an `advance` action.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc

from covel.common.v1 import common_pb2
from covel.scheduler.v1 import scheduler_pb2
from covel.store.v1 import store_pb2, store_pb2_grpc
from services.scheduler.api.idempotency_keys import check_idempotency_key
from services.scheduler.api.turn_stream import TurnStreams
from services.scheduler.execution.origins import TurnOrigin
from services.scheduler.public_api import from_request, respond
from services.scheduler.store_pages import all_turns
from services.scheduler.turn.concealment import conceal_turn
from services.scheduler.turn.player_input import validate_actions
from services.scheduler.turn.request import PlayerTurn, TurnRequest
from services.scheduler.turn.retry_seeds import RetrySource, committed_operations
from shared.errors import failed_precondition, require, rpc
from shared.security.auth import caller

# The turns a retry runs again: a player's, or a continuation of one.
RETRIED_ORIGINS = (TurnOrigin.PLAYER, TurnOrigin.CONTINUATION)
SESSION_ID_HINT = "the id CreateSession returned"


class StoryMoves:
    def __init__(self, store: store_pb2_grpc.TransactionalStoreStub, streams: TurnStreams) -> None:
        self._store = store
        self._streams = streams

    @rpc
    async def RetryTurn(self, request: scheduler_pb2.RetryTurnRequest, context: grpc.aio.ServicerContext) -> AsyncIterator[scheduler_pb2.TurnEvent]:
        require(request.session_id, "session_id", SESSION_ID_HINT)
        check_idempotency_key(request.idempotency_key)
        source = await self._turn(request.session_id, request.turn_id or await self._last(request.session_id))
        if source.origin not in RETRIED_ORIGINS:
            raise failed_precondition(f"turn {source.id} is a {source.origin!r} turn: a retry runs a player's turn (or its "
                                      "continuation) again", reason="TURN_NOT_LAST", subject=f"turns/{source.id}")
        actions = list(source.actions)
        if request.replace_actions:
            actions = validate_actions([from_request(action, common_pb2.PlayerAction, f"actions[{index}]")
                                        for index, action in enumerate(request.actions)]) if request.actions else [_advance(source)]
        # A deleted message: what follows the turn before goes on as a continuation of it (a system `advance`).
        origin = source.origin if not request.replace_actions else TurnOrigin.PLAYER if request.actions else TurnOrigin.CONTINUATION
        turn_request = TurnRequest(request.session_id, request.idempotency_key, PlayerTurn(actions), origin=origin,
                                   retry=RetrySource(source.id, source.version_of or source.id, committed_operations(source)))
        async for event in self._streams.one_turn(turn_request):
            yield event

    @rpc
    async def ListTurnVersions(self, request: scheduler_pb2.ListTurnVersionsRequest,
                               context: grpc.aio.ServicerContext) -> scheduler_pb2.ListTurnVersionsResponse:
        require(request.session_id, "session_id", SESSION_ID_HINT)
        target = await self._turn(request.session_id, request.turn_id or await self._last(request.session_id))
        first = target.version_of or target.id
        versions = [turn for turn in await all_turns(self._store, request.session_id)
                    if turn.status == store_pb2.TURN_STATUS_COMMITTED and first in (turn.id, turn.version_of)]
        chosen = next((index for index, turn in enumerate(versions) if not turn.off_line), -1)
        return respond(scheduler_pb2.ListTurnVersionsResponse, versions=[conceal_turn(turn) for turn in versions], chosen=chosen)

    @rpc
    async def SelectTurnVersion(self, request: scheduler_pb2.SelectTurnVersionRequest,
                                context: grpc.aio.ServicerContext) -> scheduler_pb2.SelectTurnVersionResponse:
        session = await self._move(request.session_id, request.turn_id, request.request_id, "version")
        return respond(scheduler_pb2.SelectTurnVersionResponse, session=session)

    @rpc
    async def RewindSession(self, request: scheduler_pb2.RewindSessionRequest,
                            context: grpc.aio.ServicerContext) -> scheduler_pb2.RewindSessionResponse:
        session = await self._move(request.session_id, request.turn_id, request.request_id, "rewind")
        return respond(scheduler_pb2.RewindSessionResponse, session=session)

    @rpc
    async def BranchSession(self, request: scheduler_pb2.BranchSessionRequest,
                            context: grpc.aio.ServicerContext) -> scheduler_pb2.BranchSessionResponse:
        require(request.session_id, "session_id", SESSION_ID_HINT)
        require(request.turn_id, "turn_id", "a committed turn on the story's line (ListTurns)")
        check_idempotency_key(request.request_id, "request_id")
        reply = await self._store.BranchSession(store_pb2.BranchSessionRequest(
            session_id=request.session_id, turn_id=request.turn_id, request_id=request.request_id, owner=caller().name))
        return respond(scheduler_pb2.BranchSessionResponse, session=reply.session)

    async def _move(self, session_id: str, turn_id: str, request_id: str, move: str) -> store_pb2.Session:
        require(session_id, "session_id", SESSION_ID_HINT)
        require(turn_id, "turn_id", "a committed turn of the session (ListTurns; ListTurnVersions for versions)")
        check_idempotency_key(request_id, "request_id")
        reply = await self._store.SetSessionHead(store_pb2.SetSessionHeadRequest(
            session_id=session_id, turn_id=turn_id, request_id=request_id, move=move))
        return reply.session

    async def _last(self, session_id: str) -> str:
        """The last player's (or continuation) turn of the story's line: the turns after it are its follow-ups
        (detached jobs' background turns, manual runs, actions), which a retry takes off the line with it."""
        line = [turn for turn in await all_turns(self._store, session_id)
                if turn.status == store_pb2.TURN_STATUS_COMMITTED and not turn.off_line and turn.origin in RETRIED_ORIGINS]
        if not line:
            raise failed_precondition(f"session {session_id} has no player's turn yet: play one first", reason="TURN_NOT_LAST",
                                      subject=f"sessions/{session_id}")
        return line[-1].id

    async def _turn(self, session_id: str, turn_id: str) -> store_pb2.Turn:
        return (await self._store.GetTurn(store_pb2.GetTurnRequest(session_id=session_id, turn_id=turn_id))).turn


def _advance(source: store_pb2.Turn) -> common_pb2.PlayerAction:
    """A deleted message's place: the story goes on from the turn before, as an auto-advance does."""
    seat = next((action.seat_id for action in source.actions if action.seat_id), "main")
    return common_pb2.PlayerAction(seat_id=seat, kind="advance", source="system")

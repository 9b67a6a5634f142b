"""Turns: SubmitActions, RunManual, WatchTurn, GetTurn, ListTurns, ListMessages."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc

from covel.common.v1 import common_pb2
from covel.scheduler.v1 import scheduler_pb2
from covel.store.v1 import store_pb2, store_pb2_grpc
from services.scheduler.api.idempotency_keys import check_idempotency_key
from services.scheduler.api.relay import relay
from services.scheduler.api.running_packages import RunningPackages
from services.scheduler.api.submit import Submissions
from services.scheduler.api.turn_follow import TurnFollower
from services.scheduler.api.turn_stream import TurnStreams
from services.scheduler.catalogue import Package, Runtime
from services.scheduler.execution.activation_payloads import payload_problem
from services.scheduler.public_api import from_request, respond
from services.scheduler.session_access import guest_seat
from services.scheduler.turn.concealment import conceal_turn
from services.scheduler.turn.player_input import validate_actions
from services.scheduler.turn.request import ManualRun, TurnRequest
from shared.errors import FieldViolation, ServiceError, invalid_argument, require, rpc
from shared.structs import from_struct


def guest_seated(actions: list[common_pb2.PlayerAction]) -> list[common_pb2.PlayerAction]:
    """A guest's actions are its own seat's (an action naming no seat gets it; naming another is refused)."""
    seat = guest_seat()
    if seat is None:
        return actions
    for index, action in enumerate(actions):
        if action.seat_id not in ("", seat):
            raise ServiceError(grpc.StatusCode.PERMISSION_DENIED, f"actions[{index}].seat_id: you play seat {seat} of this session; "
                               "leave seat_id empty or name it", [FieldViolation(f"actions[{index}].seat_id", f"must be {seat} or empty")],
                               reason="SEAT_NOT_YOURS")
        action.seat_id = seat
    return actions


class Turns:
    def __init__(self, store: store_pb2_grpc.TransactionalStoreStub, submissions: Submissions, streams: TurnStreams,
                 follower: TurnFollower, running_packages: RunningPackages) -> None:
        self._store = store
        self._running_packages = running_packages
        self._submissions = submissions
        self._streams = streams
        self._follower = follower

    @rpc
    async def SubmitActions(self, request: scheduler_pb2.SubmitActionsRequest, context: grpc.aio.ServicerContext) -> AsyncIterator[scheduler_pb2.TurnEvent]:
        require(request.session_id, "session_id", "the id CreateSession returned")
        check_idempotency_key(request.idempotency_key)
        actions = validate_actions(guest_seated([from_request(action, common_pb2.PlayerAction, f"actions[{index}]")
                                                 for index, action in enumerate(request.actions)]))
        async for event in self._submissions.submit(request, actions):
            yield event

    @rpc
    async def RunManual(self, request: scheduler_pb2.RunManualRequest, context: grpc.aio.ServicerContext) -> AsyncIterator[scheduler_pb2.TurnEvent]:
        require(request.session_id, "session_id", "the id CreateSession returned")
        require(request.runtime_id, "runtime_id", "a runtime with schedule.trigger.type: manual")
        check_idempotency_key(request.idempotency_key)
        payload = from_struct(request.payload)
        named = await self._named(request.session_id, request.runtime_id)
        if named is not None:
            problem = payload_problem(*named, payload)
            if problem is not None:
                raise ServiceError(grpc.StatusCode.INVALID_ARGUMENT, f"payload: {problem}",
                                   [FieldViolation("payload", f"{problem}; send a payload its io.payloadSchema accepts")],
                                   reason="PAYLOAD_INVALID", metadata={"runtime_id": request.runtime_id})
        # schedule.background: true runs it as a job outside the graph whatever the request says: the caller gets the
        # turn id (its job) with turn_started at once; without it, the request's flag decides.
        background = request.background or (named is not None and named[0].manifest.schedule.background is True)
        turn_request = TurnRequest(
            request.session_id, request.idempotency_key, ManualRun(request.runtime_id, payload),
            origin="background" if background else "manual",
        )
        async for event in self._streams.one_turn(turn_request, background=background):
            yield event

    async def _named(self, session_id: str, runtime_id: str) -> tuple[Runtime, Package] | None:
        """The runtime RunManual names and its package, if a running plugin of the session has it (the turn says why not)."""
        packages = await self._running_packages.of(session_id)
        return next(((r, p) for p in packages for r in p.runtimes if r.runtime_id == runtime_id), None)

    @rpc
    async def WatchTurn(self, request: scheduler_pb2.WatchTurnRequest, context: grpc.aio.ServicerContext) -> AsyncIterator[scheduler_pb2.TurnEvent]:
        require(request.session_id, "session_id", "the id CreateSession returned")
        async for event in self._follower.followed(request.session_id, request.turn_id):
            yield event

    @rpc
    async def ListMessages(self, request: scheduler_pb2.ListMessagesRequest, context: grpc.aio.ServicerContext) -> scheduler_pb2.ListMessagesResponse:
        require(request.session_id, "session_id", "the id CreateSession returned")
        if request.limit < 0:
            raise invalid_argument("limit", "must be 0 (a page from the first) or positive (the newest)")
        return await relay(self._store.ListMessages, store_pb2.ListMessagesRequest(
            session_id=request.session_id, limit=request.limit, page_size=request.page_size, page_token=request.page_token),
            scheduler_pb2.ListMessagesResponse, "messages", "next_page_token")

    @rpc
    async def GetTurn(self, request: scheduler_pb2.GetTurnRequest, context: grpc.aio.ServicerContext) -> scheduler_pb2.GetTurnResponse:
        require(request.session_id, "session_id", "the id CreateSession returned")
        require(request.turn_id, "turn_id", "a turn id from the turn stream or ListTurns")
        reply = await self._store.GetTurn(
            store_pb2.GetTurnRequest(session_id=request.session_id, turn_id=request.turn_id)
        )
        return respond(scheduler_pb2.GetTurnResponse, turn=conceal_turn(reply.turn))

    @rpc
    async def ListTurns(self, request: scheduler_pb2.ListTurnsRequest, context: grpc.aio.ServicerContext) -> scheduler_pb2.ListTurnsResponse:
        require(request.session_id, "session_id", "the id CreateSession returned")
        reply = await self._store.ListTurns(store_pb2.ListTurnsRequest(
            session_id=request.session_id, page_size=request.page_size, page_token=request.page_token, newest_first=request.newest_first))
        return respond(scheduler_pb2.ListTurnsResponse, turns=[conceal_turn(turn) for turn in reply.turns], next_page_token=reply.next_page_token)

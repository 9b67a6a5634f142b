"""A session's seats and what they may do: ListActionKinds (turn/action_kinds.py), SwitchCharacter."""

from __future__ import annotations

import grpc

from covel.scheduler.v1 import scheduler_pb2
from covel.store.v1 import store_pb2, store_pb2_grpc
from services.scheduler.api.relay import relay
from services.scheduler.api.running_packages import RunningPackages
from services.scheduler.public_api import respond
from services.scheduler.turn.action_kinds import kind_to_proto, session_catalogue
from services.scheduler.turn.player_input import IMPLICIT_SEAT
from shared.errors import require, rpc
from shared.page_tokens import pages


class Seats:
    def __init__(self, store: store_pb2_grpc.TransactionalStoreStub, running_packages: RunningPackages) -> None:
        self._store = store
        self._running_packages = running_packages

    @rpc
    @pages("kinds")
    async def ListActionKinds(self, request: scheduler_pb2.ListActionKindsRequest, context: grpc.aio.ServicerContext) -> scheduler_pb2.ListActionKindsResponse:
        require(request.session_id, "session_id", "the id CreateSession returned")
        session = (await self._store.GetSession(store_pb2.GetSessionRequest(session_id=request.session_id))).session
        catalogue = session_catalogue(await self._running_packages.of(request.session_id, session), session.locale)
        return respond(scheduler_pb2.ListActionKindsResponse, kinds=[kind_to_proto(rule) for rule in catalogue.values()],
                       seats=session.seats or [IMPLICIT_SEAT])

    @rpc
    async def SwitchCharacter(self, request: scheduler_pb2.SwitchCharacterRequest, context: grpc.aio.ServicerContext) -> scheduler_pb2.SwitchCharacterResponse:
        require(request.session_id, "session_id", "the id CreateSession returned")
        require(request.character_id, "character_id", "one of the seat's characters (ListActionKinds lists the seats)")
        return await relay(self._store.SetSeatCharacter, store_pb2.SetSeatCharacterRequest(
            session_id=request.session_id, seat_id=request.seat_id or "main", character_id=request.character_id),
            scheduler_pb2.SwitchCharacterResponse, "session")

"""The session's lorebook: ListLorebook; the player writes its own entries (owner `player`): PutLorebookEntry,
DeleteLorebookEntry. The world's and plugins' entries are read-only here."""

from __future__ import annotations

import grpc

from covel.common.v1 import common_pb2
from covel.scheduler.v1 import scheduler_pb2
from covel.store.v1 import store_pb2, store_pb2_grpc
from services.scheduler.api.relay import relay
from services.scheduler.public_api import from_request, respond
from shared.errors import invalid_argument, require, rpc
from shared.lorebook import check_entry as check_lorebook_entry
from shared.lorebook_rules import activation_from_proto, rules_problem
from shared.page_tokens import pages

PLAYER_OWNER = "player"


class Lorebook:
    def __init__(self, store: store_pb2_grpc.TransactionalStoreStub) -> None:
        self._store = store

    @rpc
    @pages("entries")
    async def ListLorebook(self, request: scheduler_pb2.ListLorebookRequest, context: grpc.aio.ServicerContext) -> scheduler_pb2.ListLorebookResponse:
        require(request.session_id, "session_id", "the id CreateSession returned")
        world = await self._store.GetWorld(store_pb2.GetWorldRequest(session_id=request.session_id))
        return respond(scheduler_pb2.ListLorebookResponse, entries=world.lorebook)

    @rpc
    async def PutLorebookEntry(self, request: scheduler_pb2.PutLorebookEntryRequest, context: grpc.aio.ServicerContext) -> scheduler_pb2.PutLorebookEntryResponse:
        require(request.session_id, "session_id", "the id CreateSession returned")
        require(request.id, "id", "the entry's id, e.g. old-lighthouse-keeper")
        entry = store_pb2.LorebookEntry(owner=PLAYER_OWNER, id=request.id, title=request.title, keys=list(request.keys),
                                        content=request.content, constant=request.constant, disabled=request.disabled)
        if request.HasField("activation"):
            entry.activation.CopyFrom(from_request(request.activation, common_pb2.LorebookActivation, "activation"))
            problem = rules_problem(activation_from_proto(entry.activation))
            if problem:
                raise invalid_argument(problem.split(" ", 1)[0], problem)
        check_lorebook_entry(entry)
        return await relay(self._store.PutLorebookEntry, store_pb2.PutLorebookEntryRequest(session_id=request.session_id, entry=entry),
                           scheduler_pb2.PutLorebookEntryResponse, "entry")

    @rpc
    async def DeleteLorebookEntry(self, request: scheduler_pb2.DeleteLorebookEntryRequest, context: grpc.aio.ServicerContext) -> scheduler_pb2.DeleteLorebookEntryResponse:
        require(request.session_id, "session_id", "the id CreateSession returned")
        require(request.id, "id", "the id of one of the player's own entries")
        return await relay(self._store.DeleteLorebookEntry, store_pb2.DeleteLorebookEntryRequest(
            session_id=request.session_id, owner=PLAYER_OWNER, id=request.id), scheduler_pb2.DeleteLorebookEntryResponse, "deleted")

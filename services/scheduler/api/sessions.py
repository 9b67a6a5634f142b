"""Sessions: CreateSession, ResetSession, GetSession, EndSession, RenameSession, SelectOpening, ListSessions."""

from __future__ import annotations

import grpc

from covel.registry.v1 import registry_pb2_grpc
from covel.scheduler.v1 import resources_pb2, scheduler_pb2
from covel.store.v1 import store_pb2, store_pb2_grpc
from services.scheduler.api.relay import relay
from services.scheduler.api.session_creation import SessionCreation
from services.scheduler.api.session_hooks import dispatch_session_event
from services.scheduler.api.world_sessions import expanded_opening, fetch_world, opening_text
from services.scheduler.hooks.bus import HookBus
from services.scheduler.hooks.payloads import SessionEnd
from services.scheduler.public_api import request_text, respond
from services.scheduler.turn.runner import TurnRunner
from shared.errors import failed_precondition, permission_denied, require, rpc
from shared.security.auth import caller


class Sessions:
    def __init__(self, store: store_pb2_grpc.TransactionalStoreStub, creation: SessionCreation, hooks: HookBus,
                 runner: TurnRunner, registry: registry_pb2_grpc.PluginRegistryStub) -> None:
        self._store = store
        self._registry = registry
        self._creation = creation
        self._hooks = hooks
        self._runner = runner

    @rpc
    async def CreateSession(self, request: scheduler_pb2.CreateSessionRequest, context: grpc.aio.ServicerContext) -> scheduler_pb2.CreateSessionResponse:
        return await self._creation.create(request)

    @rpc
    async def ResetSession(self, request: scheduler_pb2.ResetSessionRequest, context: grpc.aio.ServicerContext) -> scheduler_pb2.ResetSessionResponse:
        require(request.session_id, "session_id", "the session to start over")
        previous = (await self._store.GetSession(store_pb2.GetSessionRequest(session_id=request.session_id))).session
        if previous.status != store_pb2.SESSION_STATUS_ACTIVE:
            raise failed_precondition(f"session {previous.id} has ended; create a new session instead", reason="SESSION_ENDED",
                                      subject=f"sessions/{previous.id}")
        if self._runner.running_turn(previous.id):
            raise failed_precondition(f"session {previous.id} has a turn running; Cancel it first, then reset", reason="TURN_RUNNING",
                                      subject=f"sessions/{previous.id}")
        # The successor keeps what the player chose: plugins, approvals, settings, language, world.
        created = await self._creation.create(scheduler_pb2.CreateSessionRequest(
            requested_plugins=list(previous.requested_plugins), excluded_plugins=list(previous.excluded_plugins),
            locale=previous.locale, world_id=previous.world_id, title=previous.title,
            plugin_settings=dict(previous.plugin_settings), approved_plugins=list(previous.approved_plugins),
        ), command="reset", previous=previous)
        ended = await self.EndSession(scheduler_pb2.EndSessionRequest(session_id=previous.id, reason=resources_pb2.SESSION_ENDING_ENDED), context)
        return respond(scheduler_pb2.ResetSessionResponse, session=created.session, previous_session=ended.session,
                       rejected=created.rejected, unavailable=created.unavailable)

    @rpc
    async def GetSession(self, request: scheduler_pb2.GetSessionRequest, context: grpc.aio.ServicerContext) -> scheduler_pb2.GetSessionResponse:
        require(request.session_id, "session_id", "the id CreateSession returned")
        return await relay(self._store.GetSession, store_pb2.GetSessionRequest(session_id=request.session_id),
                           scheduler_pb2.GetSessionResponse, "session")

    @rpc
    async def EndSession(self, request: scheduler_pb2.EndSessionRequest, context: grpc.aio.ServicerContext) -> scheduler_pb2.EndSessionResponse:
        require(request.session_id, "session_id", "the session to end")
        reason = request_text(request, "reason") or "ended"
        before = (await self._store.GetSession(store_pb2.GetSessionRequest(session_id=request.session_id))).session
        reply = await self._store.EndSession(
            store_pb2.EndSessionRequest(session_id=request.session_id, reason=reason)
        )
        running = self._runner.running_turn(request.session_id)
        if running:
            # Only a detached job's execution can still run here (the store refuses to end a player's turn):
            # stop it now rather than at its next lease renewal.
            self._runner.cancel(request.session_id, running, "the session ended")
        if reply.changed:
            await dispatch_session_event(self._hooks, SessionEnd(before.id, reason), before)
        return respond(scheduler_pb2.EndSessionResponse, session=reply.session)

    @rpc
    async def RenameSession(self, request: scheduler_pb2.RenameSessionRequest, context: grpc.aio.ServicerContext) -> scheduler_pb2.RenameSessionResponse:
        """Owner or operator (session_access checks every request naming a session); the store validates the title."""
        require(request.session_id, "session_id", "the session to rename")
        return await relay(self._store.RenameSession, store_pb2.RenameSessionRequest(session_id=request.session_id, title=request.title),
                           scheduler_pb2.RenameSessionResponse, "session")

    @rpc
    async def SelectOpening(self, request: scheduler_pb2.SelectOpeningRequest, context: grpc.aio.ServicerContext) -> scheduler_pb2.SelectOpeningResponse:
        """Swipe the opening: another of the world's openings, expanded as CreateSession expands it (owner or operator)."""
        require(request.session_id, "session_id", "the session whose opening to change")
        session = (await self._store.GetSession(store_pb2.GetSessionRequest(session_id=request.session_id))).session
        if not session.world_id:
            raise failed_precondition(f"session {session.id} has no world, so no openings to choose from", reason="NO_OPENING",
                                      subject=f"sessions/{session.id}")
        world = await fetch_world(self._registry, session.world_id, session.locale)
        text = expanded_opening(world, opening_text(world, request.opening_id))
        reply = await self._store.SetOpening(store_pb2.SetOpeningRequest(session_id=session.id, text=text, opening_id=request.opening_id))
        return respond(scheduler_pb2.SelectOpeningResponse, message=reply.message)

    @rpc
    async def ListSessions(self, request: scheduler_pb2.ListSessionsRequest, context: grpc.aio.ServicerContext) -> scheduler_pb2.ListSessionsResponse:
        principal = caller()
        if request.owner and request.owner != principal.name and not principal.is_operator:
            raise permission_denied("owner: only an operator lists another principal's sessions; leave it empty for your own")
        return await relay(self._store.ListSessions, store_pb2.ListSessionsRequest(
            owner=request.owner or principal.name, page_size=request.page_size, page_token=request.page_token,
            include_ended=request.include_ended), scheduler_pb2.ListSessionsResponse, "sessions", "next_page_token")

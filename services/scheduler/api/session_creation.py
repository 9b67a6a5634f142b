"""A new session, as its steps: language, the parent of a /new command, the world, the plugins resolved and
their approvals and settings checked, the seats, the store's record, then SessionStart and the command events.
CreateSession and ResetSession (a successor keeping what the player chose) both create through it."""

from __future__ import annotations

from collections.abc import Mapping

import grpc
from google.protobuf import struct_pb2

from covel.registry.v1 import registry_pb2
from covel.scheduler.v1 import scheduler_pb2
from covel.store.v1 import store_pb2
from services.scheduler.api.session_hooks import dispatch_session_event
from services.scheduler.api.session_plugins import refuse_rejected_requests
from services.scheduler.api.world_sessions import WorldStart, default_seats, import_world_data, world_start
from services.scheduler.hooks.bus import HookBus
from services.scheduler.hooks.event_keys import SchedulerEventKeys
from services.scheduler.hooks.payloads import SessionStart
from services.scheduler.peers import Peers
from services.scheduler.plugin_cache import PluginCache
from services.scheduler.public_api import from_request, respond
from services.scheduler.turn.setting_values import FRAMEWORK, check_plugin_settings
from shared.errors import invalid_argument, require
from shared.seats import check_seats
from shared.security.auth import caller
from shared.structs import to_struct

LOCALES = ("en", "zh")


class SessionCreation:
    def __init__(self, peers: Peers, plugins: PluginCache, hooks: HookBus, events: SchedulerEventKeys) -> None:
        self._registry = peers.registry
        self._store = peers.store
        self._plugins = plugins
        self._hooks = hooks
        self._events = events

    async def create(self, request: scheduler_pb2.CreateSessionRequest, *, command: str = "new",
                     previous: store_pb2.Session | None = None) -> scheduler_pb2.CreateSessionResponse:
        locale = request.locale or "en"
        if locale not in LOCALES:
            raise invalid_argument("locale", f"is {request.locale!r}; use one of {', '.join(LOCALES)}")
        parent = await self._parent_session(request)
        # -- world: the world package's plugins, contracts, presets and starting state (world_sessions.py)
        world = await world_start(self._registry, request, locale)
        if world is not None:
            request = world.request
        resolved = await self._resolve_plugins(request)
        # activePlugins keeps the plugins stopped by a missing dependency: they come back with it.
        active = list(resolved.session_plugins)
        _check_approvals(request, active)
        await self._check_plugin_settings(request.plugin_settings, active)
        seats = _seats(request, world)
        if world is not None:
            await import_world_data(self._registry, self._plugins, world, list(resolved.active), locale)
        session = await self._store_session(request, locale, seats, world, resolved, previous)
        running = _running(session, resolved)
        # Approved community plugins' code loads now (once), so SessionStart reaches them (HookBus.load_approved).
        await self._hooks.load_approved([plugin for plugin in session.approved_plugins if plugin in active])
        await dispatch_session_event(self._hooks, SessionStart(session.id, session.world_id), running)
        if command == "reset" and previous is not None:
            await self._events.command_reset(running, previous)
        elif parent is not None:
            # command:new only for a new-session command from an existing session (spec: emitCommandHooks).
            await self._events.command_new(running, parent)
        return respond(
            scheduler_pb2.CreateSessionResponse,
            session=session,
            rejected=[*(world.left_out if world is not None else []), *(r for r in resolved.rejected if r.plugin_id not in active)],
            unavailable=resolved.unavailable, unmet_requirements=resolved.unmet,
        )

    async def _parent_session(self, request: scheduler_pb2.CreateSessionRequest) -> store_pb2.Session | None:
        """The session a /new command came from, when the caller asks for command hooks."""
        if not request.emit_command_hooks:
            return None
        require(request.parent_session_id, "parent_session_id", "the session the new-session command was given in (emit_command_hooks)")
        try:
            reply = await self._store.GetSession(store_pb2.GetSessionRequest(session_id=request.parent_session_id))
        except grpc.aio.AioRpcError as error:
            if error.code() == grpc.StatusCode.NOT_FOUND:
                raise invalid_argument("parent_session_id", f"no session {request.parent_session_id!r}; name an existing session") from error
            raise
        return reply.session

    async def _resolve_plugins(self, request: scheduler_pb2.CreateSessionRequest) -> registry_pb2.ResolveSessionPluginsResponse:
        resolved = await self._registry.ResolveSessionPlugins(
            registry_pb2.ResolveSessionPluginsRequest(
                requested=list(request.requested_plugins), excluded=list(request.excluded_plugins),
                approved=list(request.approved_plugins), approvals_known=True,
                required_contracts=list(request.required_contracts),
            ),
        )
        refuse_rejected_requests(request.requested_plugins, resolved)
        return resolved

    async def _check_plugin_settings(self, settings: Mapping[str, struct_pb2.Struct], active: list[str]) -> None:
        """INVALID_ARGUMENT (nothing created) for a setting value its package's contributes.settings refuses."""
        if not settings:
            return
        named = [plugin_id for plugin_id in settings if plugin_id != FRAMEWORK]
        packages = {p.id: p for p in await self._plugins.packages([p for p in named if p in active], timeout_s=10)}
        for plugin_id in named:
            if plugin_id in packages:
                continue
            try:  # installed but not enabled in this session: its values are still checked
                packages.update({p.id: p for p in await self._plugins.packages([plugin_id], timeout_s=10)})
            except grpc.aio.AioRpcError as error:
                if error.code() != grpc.StatusCode.NOT_FOUND:
                    raise
        check_plugin_settings(settings, packages)

    async def _store_session(self, request: scheduler_pb2.CreateSessionRequest, locale: str, seats: list[store_pb2.Seat],
                             world: WorldStart | None, resolved: registry_pb2.ResolveSessionPluginsResponse,
                             previous: store_pb2.Session | None) -> store_pb2.Session:
        created = await self._store.CreateSession(
            store_pb2.CreateSessionRequest(
                session=store_pb2.Session(
                    locale=locale,
                    world_id=request.world_id,
                    title=request.title,
                    # A session belongs to its creator; a reset one stays its owner's (session_access.py).
                    owner=(previous.owner if previous is not None else "") or caller().name,
                    seats=seats or default_seats(world.world if world is not None else None),
                    active_plugins=list(resolved.session_plugins),
                    approved_plugins=list(request.approved_plugins),
                    requested_plugins=list(request.requested_plugins),
                    excluded_plugins=list(request.excluded_plugins),
                    plugin_settings=dict(request.plugin_settings),
                    # -- setup: plugins with setup runtimes start the session in its setup phase
                    **await self._setup_fields(list(resolved.active)),
                ),
                world=world.session_world if world is not None else None,
            ),
        )
        return created.session

    async def _setup_fields(self, active: list[str]) -> dict:
        packages = await self._plugins.packages(active, timeout_s=10)
        pending = {r.runtime_id: to_struct({"state": "pending"}) for p in packages for r in p.runtimes if r.stage == "setup"}
        return {"phase": "setup", "setup_runtimes": pending} if pending else {}
    # -- end setup


def _check_approvals(request: scheduler_pb2.CreateSessionRequest, active: list[str]) -> None:
    for index, plugin_id in enumerate(request.approved_plugins):
        if plugin_id not in active:
            raise invalid_argument(
                f"approved_plugins[{index}]", f"plugin {plugin_id!r} is not enabled in this session; request it too"
            )


def _seats(request: scheduler_pb2.CreateSessionRequest, world: WorldStart | None) -> list[store_pb2.Seat]:
    seats = [from_request(seat, store_pb2.Seat, f"seats[{index}]") for index, seat in enumerate(request.seats)]
    check_seats(seats, {c.id for c in world.session_world.characters} if world is not None else set())
    return seats


def _running(session: store_pb2.Session, resolved: registry_pb2.ResolveSessionPluginsResponse) -> store_pb2.Session:
    """The session as its hooks see it: those of plugins that do not run now (stopped by a missing dependency) stay silent."""
    running = store_pb2.Session()
    running.CopyFrom(session)
    del running.active_plugins[:]
    running.active_plugins.extend(resolved.active)
    return running

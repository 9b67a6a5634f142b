"""A session's plugins: GetSessionPlugins, SetSessionPlugins (session_plugins.py), SetPluginApprovals,
ListPausedPlugins and ResetPluginFaults (the fault breaker the store keeps), ListPanels (panels.py)."""

from __future__ import annotations

import asyncio

import grpc

from covel.registry.v1 import registry_pb2
from covel.scheduler.v1 import scheduler_pb2
from covel.store.v1 import store_pb2
from services.scheduler.api import session_plugins
from services.scheduler.api.relay import relay
from services.scheduler.api.running_packages import RunningPackages
from services.scheduler.community_plugins import community_plugins
from services.scheduler.hooks.bus import HookBus
from services.scheduler.hooks.event_keys import SchedulerEventKeys
from services.scheduler.panels import check_location, session_panels
from services.scheduler.peers import Peers
from services.scheduler.plugin_cache import PluginCache
from services.scheduler.public_api import request_text, respond
from shared.errors import invalid_argument, require, rpc
from shared.page_tokens import pages


class Plugins:
    def __init__(self, peers: Peers, plugins: PluginCache, running_packages: RunningPackages, events: SchedulerEventKeys,
                 hooks: HookBus | None = None) -> None:
        # Approving a community plugin has the hooks service load its code (HookBus.load_approved).
        self._hooks = hooks
        self._store = peers.store
        self._registry = peers.registry
        self._plugins = plugins
        self._running_packages = running_packages
        self._events = events

    @rpc
    async def GetSessionPlugins(self, request: scheduler_pb2.GetSessionPluginsRequest, context: grpc.aio.ServicerContext) -> scheduler_pb2.GetSessionPluginsResponse:
        require(request.session_id, "session_id", "the id CreateSession returned")
        session = (await self._store.GetSession(store_pb2.GetSessionRequest(session_id=request.session_id))).session
        confirmed = await self._plugins.resolve_confirmed(session)
        packages = await self._plugins.packages(list(session.active_plugins), timeout_s=10, generation=confirmed.generation)
        response = respond(
            scheduler_pb2.GetSessionPluginsResponse,
            active_plugins=list(session.active_plugins), runnable=list(confirmed.runnable),
            unavailable=confirmed.unavailable,
        )
        response.community.extend(community_plugins(packages, session.approved_plugins))
        return response

    @rpc
    async def SetSessionPlugins(self, request: scheduler_pb2.SetSessionPluginsRequest, context: grpc.aio.ServicerContext) -> scheduler_pb2.SetSessionPluginsResponse:
        require(request.session_id, "session_id", "the id CreateSession returned")
        session_plugins.check_changes(request)
        session = (await self._store.GetSession(store_pb2.GetSessionRequest(session_id=request.session_id))).session
        requested, excluded = session_plugins.changed_requests(session, request)
        resolved = await self._registry.ResolveSessionPlugins(registry_pb2.ResolveSessionPluginsRequest(
            requested=requested, excluded=excluded, approved=list(session.approved_plugins), approvals_known=True,
            required_contracts=await session_plugins.required_contracts(self._registry, session)))
        session_plugins.refuse_rejected_requests(request.enable, resolved, field="enable")
        updated = await session_plugins.store_plugins(self._store, session.id, requested, excluded, resolved)
        await self._events.session_patch(updated, {"enable": list(request.enable), "disable": list(request.disable)})
        return respond(
            scheduler_pb2.SetSessionPluginsResponse,
            session=updated,
            rejected=[r for r in resolved.rejected if r.plugin_id not in resolved.session_plugins],
            unavailable=resolved.unavailable, unmet_requirements=resolved.unmet)

    @rpc
    async def SetPluginApprovals(self, request: scheduler_pb2.SetPluginApprovalsRequest, context: grpc.aio.ServicerContext) -> scheduler_pb2.SetPluginApprovalsResponse:
        require(request.session_id, "session_id", "the id CreateSession returned")
        if not request.approve and not request.revoke:
            raise invalid_argument("approve", "name at least one plugin to approve or revoke")
        reply = await self._store.UpdateSessionApprovals(
            store_pb2.UpdateSessionApprovalsRequest(
                session_id=request.session_id, approve=list(request.approve), revoke=list(request.revoke)
            ),
        )
        if self._hooks is not None:
            # Its code loads now (once), and this scheduler's subscription table sees it before the next turn.
            await self._hooks.load_approved(list(request.approve))
        await self._events.session_patch(reply.session, {"approve": list(request.approve), "revoke": list(request.revoke)})
        return respond(scheduler_pb2.SetPluginApprovalsResponse, session=reply.session)

    @rpc
    @pages("plugins")
    async def ListPausedPlugins(self, request: scheduler_pb2.ListPausedPluginsRequest, context: grpc.aio.ServicerContext) -> scheduler_pb2.ListPausedPluginsResponse:
        require(request.session_id, "session_id", "the id CreateSession returned")
        # The store keeps the fault breaker every hooks replica reports to (services/store/plugin_faults.py).
        return await relay(self._store.ListPausedPlugins, store_pb2.ListPausedPluginsRequest(session_id=request.session_id),
                           scheduler_pb2.ListPausedPluginsResponse, "plugins")

    @rpc
    async def ResetPluginFaults(self, request: scheduler_pb2.ResetPluginFaultsRequest, context: grpc.aio.ServicerContext) -> scheduler_pb2.ResetPluginFaultsResponse:
        require(request.session_id, "session_id", "the id CreateSession returned")
        require(request.plugin_id, "plugin_id", "a plugin ListPausedPlugins names")
        return await relay(self._store.ResetPluginFaults, store_pb2.ResetPluginFaultsRequest(
            session_id=request.session_id, plugin_id=request.plugin_id), scheduler_pb2.ResetPluginFaultsResponse, "was_paused")

    @rpc
    @pages("panels")
    async def ListPanels(self, request: scheduler_pb2.ListPanelsRequest, context: grpc.aio.ServicerContext) -> scheduler_pb2.ListPanelsResponse:
        require(request.session_id, "session_id", "the id CreateSession returned")
        location = request_text(request, "location")
        check_location(location)
        session = (await self._store.GetSession(store_pb2.GetSessionRequest(session_id=request.session_id))).session
        packages = [p for p in await self._running_packages.of(request.session_id, session) if p.ui_panels]
        if not packages:
            return scheduler_pb2.ListPanelsResponse()
        world, *replies = await asyncio.gather(
            self._store.GetWorld(store_pb2.GetWorldRequest(session_id=request.session_id)),
            *(self._store.ListPluginData(store_pb2.ListPluginDataRequest(session_id=request.session_id, plugin_id=package.id))
              for package in packages))
        entries = [entry for reply in replies for entry in reply.entries]
        return respond(scheduler_pb2.ListPanelsResponse, panels=session_panels(packages, session, world, entries, location))

"""What a session can start with, from the registry: ListWorlds, GetWorld (world_sessions.py), ListPacks,
GetPluginPlan; and an operator's ImportWorld, passed on."""

from __future__ import annotations

import grpc

from covel.registry.v1 import registry_pb2, registry_pb2_grpc
from covel.scheduler.v1 import scheduler_pb2
from services.scheduler.api.relay import relay
from services.scheduler.api.world_sessions import fetch_world
from services.scheduler.public_api import respond
from shared.errors import permission_denied, require, rpc
from shared.page_tokens import pages
from shared.security.auth import caller


class Worlds:
    def __init__(self, registry: registry_pb2_grpc.PluginRegistryStub) -> None:
        self._registry = registry

    @rpc
    @pages("worlds")
    async def ListWorlds(self, request: scheduler_pb2.ListWorldsRequest, context: grpc.aio.ServicerContext) -> scheduler_pb2.ListWorldsResponse:
        return await relay(self._registry.ListWorlds, registry_pb2.ListWorldsRequest(locale=request.locale),
                           scheduler_pb2.ListWorldsResponse, "worlds")

    @rpc
    async def GetWorld(self, request: scheduler_pb2.GetWorldRequest, context: grpc.aio.ServicerContext) -> scheduler_pb2.GetWorldResponse:
        require(request.world_id, "world_id", "the id of a world ListWorlds lists")
        return respond(scheduler_pb2.GetWorldResponse, world=await fetch_world(self._registry, request.world_id, request.locale))

    @rpc
    async def ImportWorld(self, request: scheduler_pb2.ImportWorldRequest, context: grpc.aio.ServicerContext) -> scheduler_pb2.ImportWorldResponse:
        """Operators only: a world written into the registry's folders is every player's (docs/api.md, "Importing worlds")."""
        if not caller().is_operator:
            raise permission_denied("only an operator imports a world: it is written where every player sees it; ask your operator, "
                                    "or run `covel import <file>` on a machine you operate")
        require(request.file, "file", "the card or lorebook file's bytes (PNG, JSON or CHARX)")
        return await relay(self._registry.ImportWorld, registry_pb2.ImportWorldRequest(
            file=request.file, world_id=request.world_id, replace=request.replace, merge=request.merge),
            scheduler_pb2.ImportWorldResponse, "world")

    @rpc
    @pages("packs")
    async def ListPacks(self, request: scheduler_pb2.ListPacksRequest, context: grpc.aio.ServicerContext) -> scheduler_pb2.ListPacksResponse:
        return await relay(self._registry.ListPacks, registry_pb2.ListPacksRequest(locale=request.locale),
                           scheduler_pb2.ListPacksResponse, "packs")

    @rpc
    async def GetPluginPlan(self, request: scheduler_pb2.GetPluginPlanRequest, context: grpc.aio.ServicerContext) -> scheduler_pb2.GetPluginPlanResponse:
        require(request.world_id, "world_id", "the id of a world ListWorlds lists")
        return await relay(self._registry.GetPluginPlan, registry_pb2.GetPluginPlanRequest(
            world_id=request.world_id, pack_id=request.pack_id, locale=request.locale, approved=list(request.approved_plugins),
            custom=request.custom, requested=list(request.requested_plugins), excluded=list(request.excluded_plugins)),
            scheduler_pb2.GetPluginPlanResponse, "plan")

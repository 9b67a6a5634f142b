"""Compiled plugin packages and session plugin resolutions, cached by the registry's catalogue generation.

Each package is parsed into the typed catalogue (catalogue.py) once, when it is fetched: the
rest of the scheduler reads typed attributes, never the wire's Structs.

A resolution (ResolveConfirmedSessionPlugins) is a pure function of the catalogue and the
session's plugins and approvals, so while this process follows the registry's WatchCatalogue
stream it answers a session's turn from memory: a turn costs the registry no call. Not following
(the stream broke, the registry restarting), every resolution asks the registry again. A world's record
(ctx.world.worldRecord) is kept the same way: a catalogue generation holds one version of each world.
"""

from __future__ import annotations

import asyncio

import grpc

from covel.registry.v1 import registry_pb2, registry_pb2_grpc
from covel.store.v1 import store_pb2
from services.scheduler.catalogue import Package
from shared.logs import get_logger

log = get_logger(component="plugin_cache")
# Distinct (plugins, approvals) sets remembered per generation; past it the oldest go.
RESOLUTIONS_MAX = 4096
# Distinct (world, locale) records remembered per generation; past it the oldest go.
WORLDS_MAX = 256
# Between attempts to follow the catalogue again after the stream broke.
REFOLLOW_S = (0.2, 5.0)


class PluginCache:
    def __init__(self, registry: registry_pb2_grpc.PluginRegistryStub) -> None:
        self._registry = registry
        self._generation = 0
        self._packages: dict[str, Package] = {}
        self._lock = asyncio.Lock()
        # The generation the WatchCatalogue stream last told (0: not following it now).
        self._followed = 0
        self._resolutions: dict[tuple[tuple[str, ...], tuple[str, ...]], registry_pb2.ResolveConfirmedSessionPluginsResponse] = {}
        # (world id, locale) -> (the generation it was read at, the world).
        self._worlds: dict[tuple[str, str], tuple[int, registry_pb2.World]] = {}

    @property
    def generation(self) -> int:
        return self._generation

    async def packages(self, plugin_ids: list[str], timeout_s: float, *, generation: int = 0) -> list[Package]:
        """The packages of `plugin_ids` (in that order), fetched once per generation. A caller that
        knows the catalogue's generation (a registry reply) passes it: a newer one drops the cache,
        so a package repaired or reinstalled since is read again."""
        if generation > self._generation:
            self._packages = {}
        missing = [plugin_id for plugin_id in plugin_ids if plugin_id not in self._packages]
        if missing:
            async with self._lock:
                missing = [plugin_id for plugin_id in plugin_ids if plugin_id not in self._packages]
                if missing:
                    reply = await self._registry.GetPlugins(
                        registry_pb2.GetPluginsRequest(plugin_ids=missing), timeout=timeout_s
                    )
                    if reply.generation != self._generation:
                        self._packages = {}
                        self._generation = reply.generation
                    for package in reply.plugins:
                        self._packages[package.id] = Package.from_proto(package)
        return [self._packages[plugin_id] for plugin_id in plugin_ids if plugin_id in self._packages]

    async def resolve_confirmed(self, session: store_pb2.Session) -> registry_pb2.ResolveConfirmedSessionPluginsResponse:
        """The session's confirmed plugins as the registry resolves them (selection.py's trust gate)."""
        key = (tuple(session.active_plugins), tuple(session.approved_plugins))
        followed = self._followed
        cached = self._resolutions.get(key)
        if followed and cached is not None and cached.generation == followed:
            return cached
        reply = await self._registry.ResolveConfirmedSessionPlugins(registry_pb2.ResolveConfirmedSessionPluginsRequest(
            active_plugins=list(session.active_plugins), approved=list(session.approved_plugins), approvals_known=True))
        # Kept only if the catalogue it was resolved from is still the one followed.
        if followed and reply.generation == self._followed:
            if len(self._resolutions) >= RESOLUTIONS_MAX:
                del self._resolutions[next(iter(self._resolutions))]
            self._resolutions[key] = reply
        return reply

    async def world(self, world_id: str, locale: str) -> registry_pb2.World | None:
        """The world as the registry serves it in `locale` (None: it has no such world), from memory while this
        process follows the catalogue and the world was read at the generation followed."""
        key = (world_id, locale)
        followed = self._followed
        cached = self._worlds.get(key)
        if followed and cached is not None and cached[0] == followed:
            return cached[1]
        try:
            reply = await self._registry.GetWorld(registry_pb2.GetWorldRequest(world_id=world_id, locale=locale))
        except grpc.aio.AioRpcError as error:
            if error.code() != grpc.StatusCode.NOT_FOUND:
                raise
            return None
        if followed and reply.generation == self._followed:
            if len(self._worlds) >= WORLDS_MAX:
                del self._worlds[next(iter(self._worlds))]
            self._worlds[key] = (reply.generation, reply.world)
        return reply.world

    def invalidate(self) -> None:
        self._packages = {}
        self._resolutions = {}
        self._worlds = {}

    async def follow_catalogue(self) -> None:
        """Follow WatchCatalogue until cancelled: each new generation drops what was cached."""
        pause = REFOLLOW_S[0]
        while True:
            try:
                async for change in self._registry.WatchCatalogue(registry_pb2.WatchCatalogueRequest()):
                    self._on_generation(change.generation)
                    pause = REFOLLOW_S[0]
            except grpc.aio.AioRpcError as error:
                log.info("catalogue.follow_lost", code=error.code().name)
            self._on_generation(0)
            await asyncio.sleep(pause)
            pause = min(pause * 2, REFOLLOW_S[1])

    def _on_generation(self, generation: int) -> None:
        if generation != self._followed:
            self._resolutions = {}
            self._worlds = {}
        if generation and generation != self._generation:
            # `!=`, not `>`: a restarted registry counts from 1 again.
            self._packages = {}
        self._followed = generation

"""Compiled plugin packages, cached by the registry's catalogue generation.

Each package is parsed into the typed catalogue (catalogue.py) once, when it is fetched: the
rest of the scheduler reads typed attributes, never the wire's Structs.
"""

from __future__ import annotations

import asyncio

from covel.registry.v1 import registry_pb2, registry_pb2_grpc
from services.scheduler.catalogue import Package


class PluginCache:
    def __init__(self, registry: registry_pb2_grpc.PluginRegistryStub) -> None:
        self._registry = registry
        self._generation = 0
        self._packages: dict[str, Package] = {}
        self._lock = asyncio.Lock()

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

    def invalidate(self) -> None:
        self._packages = {}

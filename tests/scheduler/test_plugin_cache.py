"""The scheduler's plugin cache against a real registry: a session's resolution is asked once per
catalogue generation while the cache follows WatchCatalogue, asked anew after a Reload, and never
answered from memory once the registry is gone."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import grpc
import pytest

from covel.registry.v1 import registry_pb2, registry_pb2_grpc
from covel.store.v1 import store_pb2
from services.registry.server import start as start_registry
from services.registry.settings import RegistrySettings
from services.scheduler.plugin_cache import PluginCache
from tests.conftest import free_addr
from tests.registry.conftest import write_plugin
from tests.support.identities import channel_as, service_tls

pytestmark = pytest.mark.asyncio(loop_scope="session")
SESSION = store_pb2.Session(id="s1", active_plugins=["first", "second"])


class CountingRegistry:
    """The registry stub, counting ResolveConfirmedSessionPlugins calls."""

    def __init__(self, stub: registry_pb2_grpc.PluginRegistryStub) -> None:
        self._stub = stub
        self.resolutions = 0

    def __getattr__(self, name: str):
        return getattr(self._stub, name)

    async def ResolveConfirmedSessionPlugins(self, request, **kwargs):
        self.resolutions += 1
        return await self._stub.ResolveConfirmedSessionPlugins(request, **kwargs)


async def followed(cache: PluginCache, generation: int, timeout_s: float = 10) -> None:
    deadline = time.monotonic() + timeout_s
    while cache._followed != generation:
        assert time.monotonic() < deadline, f"the cache did not follow generation {generation}"
        await asyncio.sleep(0.02)


async def test_resolutions_are_cached_per_followed_generation(tmp_path: Path) -> None:
    write_plugin(tmp_path, "first", "version: 0.1.0")
    addr = free_addr()
    registry = await start_registry(RegistrySettings(registry_addr=addr, plugin_dirs=[tmp_path], **service_tls("registry")))
    following = None
    try:
        async with channel_as(addr, "scheduler") as channel, channel_as(addr, "operator") as operator:
            counting = CountingRegistry(registry_pb2_grpc.PluginRegistryStub(channel))
            cache = PluginCache(counting)  # type: ignore[arg-type]
            # Not following yet: every resolution asks.
            await cache.resolve_confirmed(SESSION)
            await cache.resolve_confirmed(SESSION)
            assert counting.resolutions == 2
            following = asyncio.create_task(cache.follow_catalogue())
            await followed(cache, 1)
            first = await cache.resolve_confirmed(SESSION)
            again = await cache.resolve_confirmed(SESSION)
            assert counting.resolutions == 3 and again == first
            assert list(first.runnable) == ["first"] and [r.plugin_id for r in first.unavailable] == ["second"]
            # Other approvals are another resolution.
            await cache.resolve_confirmed(store_pb2.Session(id="s2", active_plugins=["first", "second"], approved_plugins=["first"]))
            assert counting.resolutions == 4
            # A Reload moves the generation: the next turn asks again and sees the new plugin.
            write_plugin(tmp_path, "second", "version: 0.1.0")
            await registry_pb2_grpc.PluginRegistryStub(operator).Reload(registry_pb2.ReloadRequest(), timeout=10)
            await followed(cache, 2)
            after = await cache.resolve_confirmed(SESSION)
            assert counting.resolutions == 5 and list(after.runnable) == ["first", "second"] and after.generation == 2
            # The registry gone: no answer from memory.
            await registry.stop(0)
            await followed(cache, 0)
            with pytest.raises(grpc.aio.AioRpcError):
                await cache.resolve_confirmed(SESSION)
    finally:
        if following is not None:
            following.cancel()
        await registry.stop(0)


class CountingWorlds(CountingRegistry):
    """The registry stub, counting GetWorld calls."""

    def __init__(self, stub: registry_pb2_grpc.PluginRegistryStub) -> None:
        super().__init__(stub)
        self.worlds = 0

    async def GetWorld(self, request, **kwargs):
        self.worlds += 1
        return await self._stub.GetWorld(request, **kwargs)


async def test_a_worlds_record_is_read_once_per_followed_generation(tmp_path: Path) -> None:
    addr = free_addr()
    registry = await start_registry(RegistrySettings(registry_addr=addr, plugin_dirs=[tmp_path], **service_tls("registry")))
    following = None
    try:
        async with channel_as(addr, "scheduler") as channel, channel_as(addr, "operator") as operator:
            counting = CountingWorlds(registry_pb2_grpc.PluginRegistryStub(channel))
            cache = PluginCache(counting)  # type: ignore[arg-type]
            # Not following yet: every turn asks.
            first = await cache.world("demo-world", "")
            assert first is not None and first.id == "demo-world"
            await cache.world("demo-world", "")
            assert counting.worlds == 2
            following = asyncio.create_task(cache.follow_catalogue())
            await followed(cache, 1)
            assert await cache.world("demo-world", "") == first and await cache.world("demo-world", "") == first
            assert counting.worlds == 3, "asked once at the generation followed"
            chinese = await cache.world("demo-world", "zh")
            assert counting.worlds == 4 and chinese is not None and chinese.name != first.name, "a locale is a world of its own"
            # A world the registry does not have: None, and asked again next time (nothing kept).
            assert await cache.world("no-such-world", "") is None and await cache.world("no-such-world", "") is None
            assert counting.worlds == 6
            # A Reload moves the generation: asked again.
            await registry_pb2_grpc.PluginRegistryStub(operator).Reload(registry_pb2.ReloadRequest(), timeout=10)
            await followed(cache, 2)
            await cache.world("demo-world", "")
            await cache.world("demo-world", "")
            assert counting.worlds == 7
            # The registry gone: no answer from memory.
            await registry.stop(0)
            await followed(cache, 0)
            with pytest.raises(grpc.aio.AioRpcError):
                await cache.world("demo-world", "")
    finally:
        if following is not None:
            following.cancel()
        await registry.stop(0)

"""A registry Reload reloads the hooks service too: it watches the catalogue generation
(WatchCatalogue) and reloads entry modules when it moves."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from covel.hooks.v1 import hooks_pb2, hooks_pb2_grpc
from covel.registry.v1 import registry_pb2, registry_pb2_grpc
from services.hooks.server import start as start_hooks
from services.hooks.settings import HooksSettings
from services.registry.server import start as start_registry
from services.registry.settings import RegistrySettings
from tests.conftest import free_addr
from tests.registry.conftest import write_plugin
from tests.support.identities import channel_as, service_tls

pytestmark = pytest.mark.asyncio(loop_scope="session")


def _tool_plugin(plugin_dir: Path, plugin_id: str, tool: str) -> None:
    write_plugin(plugin_dir, plugin_id, f"contributes:\n  tools: [{tool}]", files={
        "server/index.py": f"def register(covel):\n    covel.register_tool({tool!r}, lambda ctx, args: {{}}, description='x')\n",
    })


async def _tools_when(hooks: hooks_pb2_grpc.HookDispatcherStub, generation: int, timeout_s: float = 10) -> list[str]:
    deadline = time.monotonic() + timeout_s
    while True:
        reply = await hooks.ListTools(hooks_pb2.ListToolsRequest(), timeout=5)
        if reply.generation == generation or time.monotonic() > deadline:
            assert reply.generation == generation, "the hooks service did not follow the registry's generation"
            return sorted(f"{tool.plugin_id}/{tool.name}" for tool in reply.tools)
        await asyncio.sleep(0.05)


async def test_registry_reload_reloads_the_hooks_service(tmp_path: Path) -> None:
    _tool_plugin(tmp_path, "first", "shout")
    registry_addr, hooks_addr = free_addr(), free_addr()
    registry = await start_registry(RegistrySettings(registry_addr=registry_addr, plugin_dirs=[tmp_path], **service_tls("registry")))
    hooks = await start_hooks(HooksSettings(registry_addr=registry_addr, hooks_addr=hooks_addr, **service_tls("hooks")))
    try:
        async with channel_as(registry_addr, "operator") as registry_channel, channel_as(hooks_addr, "scheduler") as hooks_channel:
            registry_stub = registry_pb2_grpc.PluginRegistryStub(registry_channel)
            hooks_stub = hooks_pb2_grpc.HookDispatcherStub(hooks_channel)
            # Community plugins: their code loads once a session approved them (and then with every generation).
            await hooks_stub.LoadApprovedPlugins(hooks_pb2.LoadApprovedPluginsRequest(plugin_ids=["first"]))
            assert await _tools_when(hooks_stub, 1) == ["first/shout"]
            _tool_plugin(tmp_path, "second", "whisper")
            reloaded = await registry_stub.Reload(registry_pb2.ReloadRequest(), timeout=10)
            assert reloaded.generation == 2
            assert await _tools_when(hooks_stub, 2) == ["first/shout"]
            await hooks_stub.LoadApprovedPlugins(hooks_pb2.LoadApprovedPluginsRequest(plugin_ids=["first", "second"]))
            assert await _tools_when(hooks_stub, 2) == ["first/shout", "second/whisper"]
    finally:
        await hooks.stop(0)
        await registry.stop(0)


async def test_watch_streams_end_when_the_registry_stops(tmp_path: Path) -> None:
    registry_addr, hooks_addr = free_addr(), free_addr()
    registry = await start_registry(RegistrySettings(registry_addr=registry_addr, plugin_dirs=[tmp_path], **service_tls("registry")))
    hooks = await start_hooks(HooksSettings(registry_addr=registry_addr, hooks_addr=hooks_addr, **service_tls("hooks")))
    try:
        async with channel_as(registry_addr, "hooks") as channel:
            stream = registry_pb2_grpc.PluginRegistryStub(channel).WatchCatalogue(registry_pb2.WatchCatalogueRequest())
            assert (await stream.read()).generation == 1
            started = time.monotonic()
            await registry.stop(5)
            assert time.monotonic() - started < 2, "a watching hooks service does not hold the registry's grace period"
    finally:
        await hooks.stop(0)

"""A registry, a store and a hooks service with one plugin written from its manifest and entry module, over real
gRPC: a hooks test's services, its plugin in the service's process or in its sandbox worker."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from covel.hooks.v1 import hooks_pb2_grpc
from services.hooks.server import start as start_hooks
from services.hooks.settings import HooksSettings
from services.registry.server import start as start_registry
from services.registry.settings import RegistrySettings
from services.store.server import start as start_store
from services.store.settings import StoreSettings
from shared.sandbox import SandboxSettings
from tests.conftest import free_addr
from tests.support.identities import PolicyRoutedStub, service_tls


@contextlib.asynccontextmanager
async def hooks_with_plugin(folder: Path, plugin_id: str, manifest: str, entry: str, *,
                            sandboxed: bool) -> AsyncIterator[PolicyRoutedStub]:
    """The hooks service's stub (each method called as an identity the policy admits); `.addr` is its address."""
    (folder / "plugins" / plugin_id / "server").mkdir(parents=True)
    (folder / "plugins" / plugin_id / "PLUGIN.md").write_text(manifest)
    (folder / "plugins" / plugin_id / "server" / "index.py").write_text(entry)
    registry_addr, hooks_addr, store_addr = free_addr(), free_addr(), free_addr()
    registry = await start_registry(RegistrySettings(registry_addr=registry_addr, plugin_dirs=[folder / "plugins"], **service_tls("registry")))
    store = await start_store(StoreSettings(data_dir=folder / "store", store_addr=store_addr, **service_tls("store")))
    service = await start_hooks(HooksSettings(registry_addr=registry_addr, hooks_addr=hooks_addr, store_addr=store_addr,
                                              **service_tls("hooks")),
                                SandboxSettings(sandbox_enabled=sandboxed))
    stub = PolicyRoutedStub(hooks_addr, hooks_pb2_grpc.HookDispatcherStub, "covel.hooks.v1.HookDispatcher", bare=False)
    stub.addr = hooks_addr
    try:
        yield stub
    finally:
        await stub.close()
        await service.stop(0)
        await store.stop(0)
        await registry.stop(0)

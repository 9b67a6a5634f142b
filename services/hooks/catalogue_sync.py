"""Keep the loaded handlers in step with the registry's catalogue generation.

Builtin packages' entry modules load with each generation. A community package's code runs only once
a session approved it (spec: session plugin resolution): its entry module is held back until
`load_approved` names it (LoadApprovedPlugins, which the scheduler calls when a session approves, or
any call whose HookContext lists it among the approved plugins), then loaded once, in its worker, and
kept, with the generations after, for every session that approves it. Until then nothing of it is
registered: no subscriptions, tools or event-key handlers.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from covel.registry.v1 import registry_pb2, registry_pb2_grpc
from services.hooks.dispatcher import HandlerTable
from services.hooks.event_keys import EventKeyTable
from services.hooks.in_process import load_entries, share_plugin_tools
from services.hooks.plugin_entries import LoadResult, PluginEntry, entry_problem
from services.hooks.sandboxed_entries import load_sandboxed, share_sandboxed_tools
from services.hooks.worker_lifespans import enter_all, leave_all
from shared.logs import get_logger
from shared.manifest import parse_definition, parse_manifest
from shared.plugin_code.declarations import ENTRY_CODES
from shared.plugin_sdk.http_client import declared_http_permissions
from shared.sandbox import SandboxPool
from shared.structs import from_struct

log = get_logger(component="catalogue_sync")


@dataclass
class LoadedHandlers:
    generation: int = 0
    table: HandlerTable = field(default_factory=lambda: HandlerTable([], {}))
    load_result: LoadResult = field(default_factory=LoadResult)
    event_keys: EventKeyTable = field(default_factory=lambda: EventKeyTable([], {}))


def _entries(reply: registry_pb2.ListPluginsResponse) -> list[PluginEntry]:
    entries = []
    for plugin in reply.plugins:
        if plugin.state != registry_pb2.PLUGIN_STATE_LOADED:
            continue
        entries.append(
            PluginEntry(
                plugin_id=plugin.id,
                root_dir=Path(plugin.root_dir),
                entry=plugin.entry,
                declared_hooks=tuple((hook.event, hook.enforce or "normal") for hook in plugin.hooks),
                source=plugin.source or "builtin",
                declared_tools=tuple(plugin.tools),
                declared_actions=tuple(plugin.actions),
                declared_services=tuple(plugin.services),
                declared_extensions=tuple(plugin.extensions),
                declared_forms=tuple(plugin.forms),
                http_permissions=_http_permissions(plugin),
            )
        )
    return entries


def _http_permissions(plugin: registry_pb2.PluginPackage) -> tuple[tuple[str, Mapping], ...]:
    """The package's and its runtimes' permissions.http, read from the typed definition and manifests."""
    definition = parse_definition(from_struct(plugin.definition))
    manifests = [parse_manifest(from_struct(runtime.manifest)) for runtime in plugin.runtimes]
    return declared_http_permissions(definition.permissions, [(manifest.id, manifest.permissions) for manifest in manifests])


def _failed_by_registry(reply: registry_pb2.ListPluginsResponse) -> dict[str, str]:
    """Packages whose entry module the registry's probe failed: load errors here too (covel hooks info)."""
    return {
        plugin.id: "; ".join(d.message for d in plugin.diagnostics if d.code in ENTRY_CODES)
        for plugin in reply.plugins
        if plugin.state == registry_pb2.PLUGIN_STATE_FAILED and any(d.code in ENTRY_CODES for d in plugin.diagnostics)
    }


def held_back(entry: PluginEntry) -> bool:
    """A community package whose code would run at load: held back until a session approves it. (One without
    an entry module, or with one that cannot load for what its manifest says, runs no code: it loads as now.)"""
    return entry.source == "community" and bool(entry.entry) and entry_problem(entry) is None


class CatalogueSync:
    def __init__(self, registry: registry_pb2_grpc.PluginRegistryStub, pool: SandboxPool | None = None) -> None:
        self._registry = registry
        # Plugin code runs in the pool's workers (None: in this process, COVEL_SANDBOX_ENABLED=false).
        self._pool = pool
        self.current = LoadedHandlers()
        self._lock = asyncio.Lock()
        # Community plugins some session approved (since this process started): loaded with every generation.
        self._approved: set[str] = set()
        # The current generation's community entries not loaded yet, by plugin id.
        self._held_back: dict[str, PluginEntry] = {}
        # Approved plugins whose entry modules load_approved is loading now (calls naming them wait for it).
        self._loading: set[str] = set()
        # Every current entry's package source (builtin, community), held back or not.
        self._sources: dict[str, str] = {}

    async def _load(self, entries: list[PluginEntry], generation: int, *, whole: bool) -> LoadResult:
        if self._pool is not None:
            return await load_sandboxed(self._pool, entries, generation, retire=whole)
        # Importing plugin modules is blocking work: keep it off the event loop.
        return await asyncio.to_thread(load_entries, entries, generation)

    async def reload(self) -> LoadedHandlers:
        async with self._lock:
            reply = await self._registry.ListPlugins(registry_pb2.ListPluginsRequest())
            entries = _entries(reply)
            held = {entry.plugin_id: entry for entry in entries if held_back(entry) and entry.plugin_id not in self._approved}
            result = await self._load([entry for entry in entries if entry.plugin_id not in held], reply.generation, whole=True)
            result.errors.update(_failed_by_registry(reply))
            # provide_lifespan: entered before the generation takes a call; the old one's left once the new one serves.
            await enter_all(result.loaded)
            previous = self.current
            self._held_back = held
            self._sources = {entry.plugin_id: entry.source for entry in entries}
            self.current = _handlers(reply.generation, result, self._sources)
            for plugin_id, error in result.errors.items():
                log.warning("plugin.entry_failed", plugin_id=plugin_id, error=error)
            for handler in self.current.event_keys.registrations:
                if handler.warning:
                    log.warning("event_key.unknown", plugin_id=handler.plugin_id, key=handler.key, warning=handler.warning)
            log.info("handlers.loaded", generation=reply.generation, plugins=len(result.loaded),
                     handlers=sum(len(loaded.registrar.hooks) for loaded in result.loaded), held_back=sorted(held))
            await leave_all(previous.load_result.loaded)
            return self.current

    def awaiting(self, plugin_ids: Iterable[str]) -> list[str]:
        """Of these approved plugins, the community ones whose entry module is not loaded yet (none: nothing to do)."""
        return [plugin_id for plugin_id in dict.fromkeys(plugin_ids) if plugin_id in self._held_back]

    async def load_approved(self, plugin_ids: Iterable[str]) -> list[str]:
        """A session approved these plugins: load the entry modules of the community ones not loaded yet, each once
        (in its worker), with the declaration cross-check of any load; a failure is a load error as at a reload.
        Returns the plugins loaded now; the handler table then includes them (GetSubscriptions, ListTools)."""
        plugin_ids = list(plugin_ids)
        if not self.awaiting(plugin_ids) and self._loading.isdisjoint(plugin_ids):
            return []
        # A call naming a plugin another call is loading waits for that load (the lock), then finds nothing to do.
        async with self._lock:
            wanted = [self._held_back.pop(plugin_id) for plugin_id in self.awaiting(plugin_ids)]
            self._loading = {entry.plugin_id for entry in wanted}
            try:
                return await self._load_approved(wanted)
            finally:
                self._loading = set()

    async def _load_approved(self, wanted: list[PluginEntry]) -> list[str]:
        if not wanted:
            return []
        self._approved.update(entry.plugin_id for entry in wanted)
        current = self.current
        added = await self._load(wanted, current.generation, whole=False)
        await enter_all(added.loaded)
        merged = LoadResult(loaded=[*current.load_result.loaded, *added.loaded], errors={**current.load_result.errors, **added.errors})
        if self._pool is not None:
            await share_sandboxed_tools(merged)
        else:
            share_plugin_tools(merged)
        self.current = _handlers(current.generation, merged, self._sources)
        for plugin_id, error in added.errors.items():
            log.warning("plugin.entry_failed", plugin_id=plugin_id, error=error)
        loaded = [plugin.entry.plugin_id for plugin in added.loaded]
        log.info("handlers.approved_loaded", generation=current.generation, plugins=loaded, failed=sorted(added.errors))
        return loaded

    async def leave_lifespans(self) -> None:
        """The service stops: the loaded plugins' lifespans are left (each plugin's bounded: lifespans.py)."""
        async with self._lock:
            await leave_all(self.current.load_result.loaded)

    async def follow_registry(self, max_delay_s: float = 5.0) -> None:
        """Reload whenever the registry's catalogue generation differs from the one loaded (a Reload or
        an install there reloads here); reconnects when the registry goes away. Runs until cancelled."""
        delay = 0.1
        while True:
            try:
                async for change in self._registry.WatchCatalogue(registry_pb2.WatchCatalogueRequest()):
                    delay = 0.1
                    # `!=`, not `>`: a restarted registry counts from 1 again.
                    if change.generation != self.current.generation:
                        await self.reload()
            except grpc.aio.AioRpcError as error:
                log.info("registry.watch_lost", code=error.code().name)
            await asyncio.sleep(delay)
            delay = min(delay * 2, max_delay_s)

    async def reload_when_registry_is_up(self, wait_s: float) -> None:
        deadline = time.monotonic() + wait_s
        delay = 0.1
        while True:
            try:
                await self.reload()
                return
            except grpc.aio.AioRpcError as error:
                if time.monotonic() + delay > deadline:
                    raise
                log.info("registry.waiting", code=error.code().name)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)


def _handlers(generation: int, result: LoadResult, sources: dict[str, str]) -> LoadedHandlers:
    registrations = [hook for loaded in result.loaded for hook in loaded.registrar.hooks]
    event_handlers = [handler for loaded in result.loaded for handler in loaded.registrar.event_handlers]
    return LoadedHandlers(generation, HandlerTable(registrations, sources), result, EventKeyTable(event_handlers, sources))

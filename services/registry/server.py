"""gRPC surface of the plugin registry."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import grpc

from covel.registry.v1 import registry_pb2, registry_pb2_grpc
from services.registry.catalogue import Catalogue, Snapshot
from services.registry.diagnostics import has_errors
from services.registry.importing.importer import import_world
from services.registry.loaded_world import LoadedWorld, WorldState
from services.registry.manifest_fields import PLUGIN_ID
from services.registry.media_files import read_media
from services.registry.package_installer import InstallRefused, install_zip, validate_zip
from services.registry.package_validator import NotAPackage, validate_paths
from services.registry.plugin_cards import plugin_cards
from services.registry.plugin_plan import UnknownPack, pack_to_proto, plan_to_proto, plugin_plan
from services.registry.proto_mapping import confirmed_to_proto, package_to_proto, resolution_to_proto
from services.registry.session_resolution import resolve_confirmed_session_plugins, resolve_session_plugins
from services.registry.settings import BUILTIN, RegistrySettings
from services.registry.validation_cache import ValidationCache
from services.registry.world_import import import_records
from services.registry.world_proto import unknown_world, world_to_proto
from services.registry.world_translations import LOCALE
from services.registry.zip_install import MAX_ZIP_BYTES
from shared.errors import ServiceError, failed_precondition, invalid_argument, not_found, require, rpc
from shared.grpc_server import RunningServer, start_server
from shared.structs import to_value

SERVICE_NAME = registry_pb2.DESCRIPTOR.services_by_name["PluginRegistry"].full_name


def _check_ids(ids: Sequence[str], field: str) -> None:
    for index, plugin_id in enumerate(ids):
        if not PLUGIN_ID.match(plugin_id):
            raise invalid_argument(
                f"{field}[{index}]",
                f"`{plugin_id}` is not a plugin id (lowercase letters, digits, `.`, `_`, `-`; at most 64)",
            )


def _check_zip(data: bytes, plugin_id: str) -> None:
    if len(data) > MAX_ZIP_BYTES:
        raise invalid_argument("zip", f"the zip is {len(data)} bytes; the limit is {MAX_ZIP_BYTES}")
    if plugin_id and not PLUGIN_ID.match(plugin_id):
        raise invalid_argument("plugin_id", f"`{plugin_id}` is not a plugin id")


def _missing(snapshot: Snapshot, plugin_id: str) -> ServiceError:
    # The plugin folders are the host's business: the message names none.
    return not_found(f"no plugin `{plugin_id}` in the catalogue (generation {snapshot.generation}); ListPlugins shows what it holds",
                     "covel.registry.v1.PluginPackage", plugin_id, reason="PLUGIN_NOT_FOUND")


MAX_PATH_CHARS = 4096


MAX_IMPORT_PLUGINS = 1000


def _loaded_world(snapshot: Snapshot, world_id: str, so: str) -> LoadedWorld:
    """The world a session would start in: NOT_FOUND naming world_id, FAILED_PRECONDITION when it failed to load."""
    world = snapshot.world(world_id)
    if world is None:
        raise unknown_world(world_id)
    if world.state is not WorldState.LOADED:
        raise failed_precondition(f"world `{world.id}` failed to load, so {so}; GetWorld shows why", reason="WORLD_FAILED",
                                  subject=f"worlds/{world.id}")
    return world


def _check_locale(locale: str) -> None:
    if locale and not LOCALE.match(locale):
        raise invalid_argument("locale", f"`{locale}` is not a locale; use a language tag such as en, zh or pt-BR")


def _package_path(written: str, plugin_dirs: Sequence[Path]) -> Path:
    """A ValidatePackage path, only inside one of the registry's plugin folders: the RPC must not
    tell a client what other folders of the host hold (or whether they exist)."""
    if len(written) > MAX_PATH_CHARS or "\x00" in written:
        raise invalid_argument("path", f"is not a usable path (at most {MAX_PATH_CHARS} characters, no NUL)")
    path = Path(written)
    inside = path.is_absolute() and any(
        path.resolve().is_relative_to(folder.resolve()) and path.resolve() != folder.resolve() for folder in plugin_dirs
    )
    if not inside:
        raise invalid_argument(
            "path", "is not inside one of the registry's plugin folders (COVEL_PLUGIN_DIRS); send the package as `zip` instead"
        )
    return path


class PluginRegistryService(registry_pb2_grpc.PluginRegistryServicer):
    def __init__(self, catalogue: Catalogue) -> None:
        self._catalogue = catalogue
        self._install_lock = asyncio.Lock()

    @rpc
    async def ListPlugins(
        self, request: registry_pb2.ListPluginsRequest, context: grpc.aio.ServicerContext
    ) -> registry_pb2.ListPluginsResponse:
        snapshot = self._catalogue.current
        return registry_pb2.ListPluginsResponse(
            plugins=[package_to_proto(package) for package in snapshot.packages], generation=snapshot.generation
        )

    @rpc
    async def GetPlugin(
        self, request: registry_pb2.GetPluginRequest, context: grpc.aio.ServicerContext
    ) -> registry_pb2.GetPluginResponse:
        require(request.plugin_id, "plugin_id", "the id of the plugin to get")
        snapshot = self._catalogue.current
        package = snapshot.get(request.plugin_id)
        if package is None:
            raise _missing(snapshot, request.plugin_id)
        return registry_pb2.GetPluginResponse(plugin=package_to_proto(package), generation=snapshot.generation)

    @rpc
    async def GetPlugins(
        self, request: registry_pb2.GetPluginsRequest, context: grpc.aio.ServicerContext
    ) -> registry_pb2.GetPluginsResponse:
        snapshot = self._catalogue.current
        packages = []
        for plugin_id in dict.fromkeys(request.plugin_ids):
            package = snapshot.get(plugin_id)
            if package is None:
                raise _missing(snapshot, plugin_id)
            packages.append(package_to_proto(package))
        return registry_pb2.GetPluginsResponse(plugins=packages, generation=snapshot.generation)

    @rpc
    async def ResolveSessionPlugins(
        self, request: registry_pb2.ResolveSessionPluginsRequest, context: grpc.aio.ServicerContext
    ) -> registry_pb2.ResolveSessionPluginsResponse:
        _check_ids(request.requested, "requested")
        _check_ids(request.excluded, "excluded")
        snapshot = self._catalogue.current
        resolution = resolve_session_plugins(
            snapshot.packages,
            list(request.requested),
            list(request.excluded),
            approved=list(request.approved) if request.approvals_known else None,
            required_contracts=list(request.required_contracts),
        )
        return resolution_to_proto(resolution, snapshot.generation)

    @rpc
    async def ResolveConfirmedSessionPlugins(
        self, request: registry_pb2.ResolveConfirmedSessionPluginsRequest, context: grpc.aio.ServicerContext
    ) -> registry_pb2.ResolveConfirmedSessionPluginsResponse:
        _check_ids(request.active_plugins, "active_plugins")
        snapshot = self._catalogue.current
        resolution = resolve_confirmed_session_plugins(
            snapshot.packages, list(request.active_plugins), approved=list(request.approved) if request.approvals_known else None
        )
        return confirmed_to_proto(resolution, snapshot.generation)

    @rpc
    async def ValidatePackage(
        self, request: registry_pb2.ValidatePackageRequest, context: grpc.aio.ServicerContext
    ) -> registry_pb2.ValidatePackageResponse:
        which = request.WhichOneof("package")
        if which is None:
            raise invalid_argument("package", "give `path` (a package on the registry host) or `zip` (the package's bytes)")
        if which == "zip":
            _check_zip(request.zip, request.plugin_id)
            plugin_id, diagnostics = await asyncio.to_thread(validate_zip, request.zip, plugin_id=request.plugin_id)
        else:
            path = _package_path(request.path, self._catalogue.plugin_dirs)
            try:
                [report] = await asyncio.to_thread(validate_paths, [path])
            except NotAPackage as error:
                raise invalid_argument("path", str(error)) from None
            plugin_id, diagnostics = report.plugin_id, report.diagnostics
        return registry_pb2.ValidatePackageResponse(
            ok=not has_errors(diagnostics), plugin_id=plugin_id, diagnostics=[d.to_proto() for d in diagnostics]
        )

    @rpc
    async def InstallPackage(
        self, request: registry_pb2.InstallPackageRequest, context: grpc.aio.ServicerContext
    ) -> registry_pb2.InstallPackageResponse:
        require(request.zip, "zip", "the package as zip bytes")
        _check_zip(request.zip, request.plugin_id)
        snapshot = self._catalogue.current
        builtin_ids = frozenset(package.id for package in snapshot.packages if package.source == BUILTIN)
        async with self._install_lock:
            try:
                outcome = await asyncio.to_thread(
                    install_zip,
                    request.zip,
                    self._catalogue.plugin_dirs,
                    builtin_dirs=self._catalogue.builtin_dirs,
                    plugin_id=request.plugin_id,
                    replace=request.replace,
                    builtin_ids=builtin_ids,
                )
            except InstallRefused as error:
                raise failed_precondition(str(error), reason="INSTALL_REFUSED", subject=f"plugins/{request.plugin_id}") from None
            generation = snapshot.generation
            if outcome.ok:
                generation = (await self._catalogue.reload()).generation
        return registry_pb2.InstallPackageResponse(
            ok=outcome.ok,
            plugin_id=outcome.plugin_id,
            diagnostics=[d.to_proto() for d in outcome.diagnostics],
            generation=generation,
            installed_dir=str(outcome.installed_dir or ""),
        )

    @rpc
    async def Reload(self, request: registry_pb2.ReloadRequest, context: grpc.aio.ServicerContext) -> registry_pb2.ReloadResponse:
        snapshot = await self._catalogue.reload()
        return registry_pb2.ReloadResponse(generation=snapshot.generation, plugin_count=len(snapshot.packages))

    @rpc
    async def ListWorlds(self, request: registry_pb2.ListWorldsRequest, context: grpc.aio.ServicerContext) -> registry_pb2.ListWorldsResponse:
        _check_locale(request.locale)
        snapshot = self._catalogue.current
        return registry_pb2.ListWorldsResponse(
            worlds=[world_to_proto(world, request.locale, summary=True) for world in snapshot.worlds], generation=snapshot.generation
        )

    @rpc
    async def GetWorld(self, request: registry_pb2.GetWorldRequest, context: grpc.aio.ServicerContext) -> registry_pb2.GetWorldResponse:
        require(request.world_id, "world_id", "the id of the world to get (ListWorlds lists them)")
        _check_locale(request.locale)
        snapshot = self._catalogue.current
        world = snapshot.world(request.world_id)
        if world is None:
            raise unknown_world(request.world_id)
        return registry_pb2.GetWorldResponse(world=world_to_proto(world, request.locale), generation=snapshot.generation)

    @rpc
    async def ImportWorld(self, request: registry_pb2.ImportWorldRequest, context: grpc.aio.ServicerContext) -> registry_pb2.ImportWorldResponse:
        require(request.file, "file", "the card or lorebook file's bytes (PNG, JSON or CHARX)")
        if not self._catalogue.world_dirs:
            raise failed_precondition("the registry has no world folder (COVEL_WORLD_DIRS) to import into", reason="NO_WORLD_FOLDER",
                                      subject="settings/COVEL_WORLD_DIRS")
        async with self._install_lock:
            world = await asyncio.to_thread(import_world, request.file, self._catalogue.world_dirs, self._catalogue.current,
                                            request.world_id, request.replace, request.merge)
            snapshot = await self._catalogue.reload()
        served = snapshot.world(world.id)
        if served is None or served.root_dir != world.root_dir:
            raise failed_precondition(f"world `{world.id}` was written to {world.root_dir}, but another folder's world of that id is served",
                                      reason="WORLD_SHADOWED", subject=f"worlds/{world.id}")
        return registry_pb2.ImportWorldResponse(world=world_to_proto(served, ""), generation=snapshot.generation,
                                                installed_dir=str(world.root_dir))

    @rpc
    async def GetWorldImport(
        self, request: registry_pb2.GetWorldImportRequest, context: grpc.aio.ServicerContext
    ) -> registry_pb2.GetWorldImportResponse:
        require(request.world_id, "world_id", "the id of the world the new session starts in")
        _check_locale(request.locale)
        if len(request.plugin_ids) > MAX_IMPORT_PLUGINS:
            raise invalid_argument("plugin_ids", f"names {len(request.plugin_ids)} plugins; a session runs at most {MAX_IMPORT_PLUGINS}")
        snapshot = self._catalogue.current
        world = _loaded_world(snapshot, request.world_id, "nothing is imported from it")
        records = import_records(world, snapshot.packages, set(request.plugin_ids), request.locale)
        return registry_pb2.GetWorldImportResponse(records=[
            registry_pb2.WorldDataRecord(plugin_id=record.plugin_id, namespace=record.namespace, key=record.key,
                                         value=to_value(record.value), source=record.source)
            for record in records
        ], generation=snapshot.generation)

    @rpc
    async def ListPacks(self, request: registry_pb2.ListPacksRequest, context: grpc.aio.ServicerContext) -> registry_pb2.ListPacksResponse:
        _check_locale(request.locale)
        snapshot = self._catalogue.current
        installed = {package.id for package in snapshot.packages if package.loaded}
        return registry_pb2.ListPacksResponse(
            packs=[pack_to_proto(pack, request.locale, installed) for pack in snapshot.packs.by_id.values()],
            diagnostics=[diagnostic.to_proto() for diagnostic in snapshot.packs.diagnostics])

    @rpc
    async def GetPluginPlan(self, request: registry_pb2.GetPluginPlanRequest, context: grpc.aio.ServicerContext) -> registry_pb2.GetPluginPlanResponse:
        require(request.world_id, "world_id", "the id of a world ListWorlds lists")
        _check_locale(request.locale)
        snapshot = self._catalogue.current
        world = _loaded_world(snapshot, request.world_id, "it has no plugin plan")
        try:
            by_hand = (list(request.requested), list(request.excluded)) if request.custom else None
            plan = plugin_plan(world, snapshot.packs, snapshot.packages, pack_id=request.pack_id, approved=list(request.approved), by_hand=by_hand)
        except UnknownPack:
            known = ", ".join(snapshot.packs.by_id) or "none"
            raise invalid_argument("pack_id", f"`{request.pack_id}` is no pack of this kernel (its packs: {known}); ListPacks lists them") from None
        installed = {package.id for package in snapshot.packages if package.loaded}
        message = plan_to_proto(plan, request.locale, installed, snapshot.generation)
        message.plugins.extend(plugin_cards(snapshot.packages, request.locale))
        return registry_pb2.GetPluginPlanResponse(plan=message)

    @rpc
    async def GetMediaFile(self, request: registry_pb2.GetMediaFileRequest, context: grpc.aio.ServicerContext) -> registry_pb2.GetMediaFileResponse:
        data, content_type = await asyncio.to_thread(read_media, self._catalogue.current, request.world_id, request.plugin_id, request.path)
        return registry_pb2.GetMediaFileResponse(content_type=content_type, data=data)

    @rpc
    async def WatchCatalogue(
        self, request: registry_pb2.WatchCatalogueRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[registry_pb2.WatchCatalogueResponse]:
        snapshot: Snapshot | None = self._catalogue.current
        while snapshot is not None:
            yield registry_pb2.WatchCatalogueResponse(generation=snapshot.generation)
            snapshot = await self._catalogue.next_after(snapshot.generation)


async def start(settings: RegistrySettings) -> RunningServer:
    """Scan the plugin folders, then serve the registry on settings.registry_addr."""
    catalogue = Catalogue(settings.plugin_dirs, builtin_dirs=settings.builtin_plugin_dirs, world_dirs=settings.world_dirs,
                          pack_files=settings.pack_files, cache=ValidationCache(settings.validation_cache_dir()))
    catalogue.load_now()
    service = PluginRegistryService(catalogue)

    def add(server: grpc.aio.Server) -> list[str]:
        registry_pb2_grpc.add_PluginRegistryServicer_to_server(service, server)
        return [SERVICE_NAME]

    running = await start_server(settings.registry_addr, add, settings=settings, service="registry")

    async def end_watches() -> None:
        catalogue.close_watchers()

    running.on_shutdown.append(end_watches)
    return running

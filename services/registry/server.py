"""gRPC surface of the plugin registry."""

from __future__ import annotations

from collections.abc import Sequence

import grpc

from covel.registry.v1 import registry_pb2, registry_pb2_grpc
from services.registry.catalogue import Catalogue, Snapshot
from services.registry.manifest_models import PLUGIN_ID
from services.registry.proto_mapping import package_to_proto, resolution_to_proto
from services.registry.session_resolution import resolve_session_plugins
from services.registry.settings import RegistrySettings
from shared.errors import ServiceError, invalid_argument, not_found, require, rpc
from shared.grpc_server import RunningServer, start_server

SERVICE_NAME = registry_pb2.DESCRIPTOR.services_by_name["PluginRegistry"].full_name


def _check_ids(ids: Sequence[str], field: str) -> None:
    for index, plugin_id in enumerate(ids):
        if not PLUGIN_ID.match(plugin_id):
            raise invalid_argument(
                f"{field}[{index}]",
                f"`{plugin_id}` is not a plugin id (lowercase letters, digits, `.`, `_`, `-`; at most 64)",
            )


def _missing(snapshot: Snapshot, plugin_id: str) -> ServiceError:
    dirs = ", ".join(str(path) for path in snapshot.plugin_dirs) or "(none)"
    return not_found(f"no plugin `{plugin_id}` in the catalogue (generation {snapshot.generation}); searched: {dirs}")


class PluginRegistryService(registry_pb2_grpc.PluginRegistryServicer):
    def __init__(self, catalogue: Catalogue) -> None:
        self._catalogue = catalogue

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
        resolution = resolve_session_plugins(snapshot.packages, list(request.requested), list(request.excluded))
        return resolution_to_proto(resolution, snapshot.generation)

    @rpc
    async def Reload(self, request: registry_pb2.ReloadRequest, context: grpc.aio.ServicerContext) -> registry_pb2.ReloadResponse:
        snapshot = await self._catalogue.reload()
        return registry_pb2.ReloadResponse(generation=snapshot.generation, plugin_count=len(snapshot.packages))


async def start(settings: RegistrySettings) -> RunningServer:
    """Scan the plugin folders, then serve the registry on settings.registry_addr."""
    catalogue = Catalogue(settings.plugin_dirs)
    catalogue.load_now()
    service = PluginRegistryService(catalogue)

    def add(server: grpc.aio.Server) -> list[str]:
        registry_pb2_grpc.add_PluginRegistryServicer_to_server(service, server)
        return [SERVICE_NAME]

    return await start_server(settings.registry_addr, add)

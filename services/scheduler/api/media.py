"""GetMedia: a picture, a sound or a webview page a session may show, read by the registry (GetMediaFile) from
the package that declares it: the session's world (its media[]), or a plugin that runs in the session (the folder
of one of its webview pages). Session ownership is checked before, as for every session RPC (session_access.py)."""

from __future__ import annotations

import grpc

from covel.registry.v1 import registry_pb2, registry_pb2_grpc
from covel.scheduler.v1 import scheduler_pb2
from covel.store.v1 import store_pb2, store_pb2_grpc
from services.scheduler.api.running_packages import RunningPackages
from shared.errors import not_found, require, rpc


class Media:
    def __init__(
        self,
        store: store_pb2_grpc.TransactionalStoreStub,
        registry: registry_pb2_grpc.PluginRegistryStub,
        running_packages: RunningPackages,
    ) -> None:
        self._store = store
        self._registry = registry
        self._running_packages = running_packages

    @rpc
    async def GetMedia(
        self, request: scheduler_pb2.GetMediaRequest, context: grpc.aio.ServicerContext
    ) -> scheduler_pb2.GetMediaResponse:
        require(request.session_id, "session_id", "the id CreateSession returned")
        require(request.path, "path", "a file of the world's media[] or of a webview panel's folder, relative to its package")
        session = (await self._store.GetSession(store_pb2.GetSessionRequest(session_id=request.session_id))).session
        if request.plugin_id:
            running = {package.id for package in await self._running_packages.of(request.session_id, session)}
            if request.plugin_id not in running:
                why = await self._running_packages.why_not_running(request.session_id, request.plugin_id)
                raise not_found(
                    f"plugin `{request.plugin_id}` does not run in the session, so it shows nothing: {why}",
                    "covel.registry.v1.PluginPackage",
                    request.plugin_id,
                    reason="PLUGIN_NOT_ACTIVE",
                )
            read = registry_pb2.GetMediaFileRequest(plugin_id=request.plugin_id, path=request.path)
        elif session.world_id:
            read = registry_pb2.GetMediaFileRequest(world_id=session.world_id, path=request.path)
        else:
            raise not_found(
                "the session has no world, so no world media; name the plugin_id of a webview's file",
                "covel.scheduler.v1.MediaFile",
                request.path,
                reason="MEDIA_NOT_DECLARED",
            )
        reply = await self._registry.GetMediaFile(read)
        return scheduler_pb2.GetMediaResponse(
            file=scheduler_pb2.MediaFile(
                plugin_id=request.plugin_id, path=read.path, content_type=reply.content_type, data=reply.data
            )
        )

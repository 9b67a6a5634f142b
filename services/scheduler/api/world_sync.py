"""SyncWorldData: a running session's world data brought to its world package as it is now (docs/worlds.md, "Sync").

The scheduler reads the world's records for the plugins running in the session (GetWorldImport, in the session's
language) and the dataset rules of those plugins; the store sets what changed, deletes what the world no longer has
of the records it gave the session, and checks every record first (services/store/world_data_sync.py)."""

from __future__ import annotations

import grpc

from covel.registry.v1 import registry_pb2, registry_pb2_grpc
from covel.scheduler.v1 import scheduler_pb2
from covel.store.v1 import store_pb2, store_pb2_grpc
from services.scheduler.execution.dataset_policies import policies_of
from services.scheduler.plugin_cache import PluginCache
from services.scheduler.public_api import respond
from shared.errors import failed_precondition, require, rpc
from shared.logs import get_logger

log = get_logger(component="scheduler.world_sync")


class WorldSync:
    def __init__(
        self, store: store_pb2_grpc.TransactionalStoreStub, registry: registry_pb2_grpc.PluginRegistryStub, plugins: PluginCache
    ) -> None:
        self._store, self._registry, self._plugins = store, registry, plugins

    @rpc
    async def SyncWorldData(
        self, request: scheduler_pb2.SyncWorldDataRequest, context: grpc.aio.ServicerContext
    ) -> scheduler_pb2.SyncWorldDataResponse:
        require(request.session_id, "session_id", "the id CreateSession returned")
        session = (await self._store.GetSession(store_pb2.GetSessionRequest(session_id=request.session_id))).session
        if not session.world_id:
            raise failed_precondition(
                f"session {session.id} was not started in a world: it has no world data to sync",
                reason="NO_WORLD",
                subject=f"sessions/{session.id}",
            )
        running = list(session.active_plugins)
        world = await self._registry.GetWorldImport(
            registry_pb2.GetWorldImportRequest(world_id=session.world_id, plugin_ids=running, locale=session.locale)
        )
        records = [
            store_pb2.PluginDataEntry(plugin_id=r.plugin_id, namespace=r.namespace, key=r.key, value=r.value)
            for r in world.records
        ]
        synced = await self._store.SyncWorldData(
            store_pb2.SyncWorldDataRequest(
                session_id=session.id,
                world_id=session.world_id,
                records=records,
                dry_run=request.dry_run,
                datasets=policies_of(await self._plugins.packages(running, timeout_s=10, generation=world.generation)),
            )
        )
        log.info(
            "world_data.synced",
            session_id=session.id,
            world_id=session.world_id,
            dry_run=request.dry_run,
            changes=len(synced.changes),
            generation=world.generation,
        )
        return respond(
            scheduler_pb2.SyncWorldDataResponse,
            unchanged=synced.unchanged,
            dry_run=synced.dry_run,
            generation=world.generation,
            changes=[
                scheduler_pb2.WorldDataChange(plugin_id=c.plugin_id, namespace=c.namespace, key=c.key, change=c.change)
                for c in synced.changes
            ],
        )

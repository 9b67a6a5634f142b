"""The packages of a session's plugins that run now: what action kinds, actions, commands and panels come from."""

from __future__ import annotations

from covel.store.v1 import store_pb2, store_pb2_grpc
from services.scheduler.plugin_cache import PluginCache


class RunningPackages:
    def __init__(self, store: store_pb2_grpc.TransactionalStoreStub, plugins: PluginCache) -> None:
        self._store = store
        self._plugins = plugins

    async def of(self, session_id: str, session: store_pb2.Session | None = None) -> list:
        """The packages of the session's plugins that run now (`session`: already read)."""
        if session is None:
            session = (await self._store.GetSession(store_pb2.GetSessionRequest(session_id=session_id))).session
        confirmed = await self._plugins.resolve_confirmed(session)
        return await self._plugins.packages(list(confirmed.runnable), timeout_s=10, generation=confirmed.generation)

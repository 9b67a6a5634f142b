"""The packages of a session's plugins that run now: what action kinds, actions, commands and panels come from."""

from __future__ import annotations

from covel.store.v1 import store_pb2, store_pb2_grpc
from services.scheduler.plugin_cache import PluginCache
from services.scheduler.turn.selection import unavailable_reason


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

    async def why_not_running(self, session_id: str, plugin_id: str) -> str:
        """Why `plugin_id` does not run in the session now: its unavailable reason (not approved, failed to load, a
        missing provider, ...), or that the session does not have it."""
        session = (await self._store.GetSession(store_pb2.GetSessionRequest(session_id=session_id))).session
        confirmed = await self._plugins.resolve_confirmed(session)
        found = next((rejection for rejection in confirmed.unavailable if rejection.plugin_id == plugin_id), None)
        if found is not None:
            return unavailable_reason(found)
        return "not-in-session: it is not one of the session's plugins (SetSessionPlugins turns it on)"

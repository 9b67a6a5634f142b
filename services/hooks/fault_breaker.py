"""Pause a plugin's hooks for a session after repeated faults, counted in the store so every hooks
replica counts together (services/store/plugin_faults.py).

Faults are handlers that raised, timed out or returned an invalid result; an abort or veto is the
plugin doing its job and does not count, nor does a cancelled parent (its handlers never report).
Each dispatch's faults go to the store; past `threshold` faults within `window_s` the plugin is
paused in the session. The scheduler reads the pauses with each turn's lease and names them in the
hook context (`paused_plugin_ids`): those plugins' handlers do not run. So the execution that
tripped the breaker keeps its plugin set, and the pause starts with the next one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import grpc

from covel.hooks.v1 import hooks_pb2
from covel.store.v1 import store_pb2, store_pb2_grpc
from shared.hook_events import HANDLER_FAULTS
from shared.logs import get_logger
from shared.plugin_pauses import paused_plugin
from shared.telemetry import metrics

log = get_logger(component="fault_breaker")


class FaultBreaker:
    def __init__(self, store: store_pb2_grpc.TransactionalStoreStub, threshold: int, window_s: float) -> None:
        self._store = store
        self._threshold = threshold
        self._window_ms = int(window_s * 1000)

    @staticmethod
    def excluded(context: hooks_pb2.HookContext) -> set[str]:
        """Plugins whose hooks must not run in this execution: the session's pauses as its turn read them."""
        return set(context.paused_plugin_ids)

    async def record(self, context: hooks_pb2.HookContext, trace: Iterable[Any]) -> None:
        """Report a dispatch's faults. A store that cannot be reached costs the count, never the dispatch."""
        faults = [store_pb2.PluginFault(plugin_id=entry.handler_plugin_id, status=entry.status, message=entry.message[:500])
                  for entry in trace if entry.status in HANDLER_FAULTS]
        if not faults:
            return
        request = store_pb2.RecordPluginFaultsRequest(session_id=context.session_id, turn_id=context.turn_id, faults=faults,
                                                      threshold=self._threshold, window_ms=self._window_ms)
        try:
            reply = await self._store.RecordPluginFaults(request)
        except grpc.aio.AioRpcError as error:
            log.warning("faults.not_recorded", session_id=context.session_id, code=error.code().name, details=error.details())
            return
        metrics.record_plugin_pauses(pause.plugin_id for pause in reply.paused)

    async def paused(self, session_id: str) -> list[hooks_pb2.PausedPlugin]:
        reply = await self._store.ListPausedPlugins(store_pb2.ListPausedPluginsRequest(session_id=session_id))
        return [paused_plugin(pause) for pause in reply.plugins]

    async def reset(self, session_id: str, plugin_id: str) -> bool:
        reply = await self._store.ResetPluginFaults(store_pb2.ResetPluginFaultsRequest(session_id=session_id, plugin_id=plugin_id))
        return reply.was_paused

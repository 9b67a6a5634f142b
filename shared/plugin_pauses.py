"""A plugin paused by the fault breaker (kept by the store) as the hooks and scheduler APIs show it."""

from __future__ import annotations

from covel.hooks.v1 import hooks_pb2
from covel.store.v1 import store_pb2


def paused_plugin(pause: store_pb2.PluginPause) -> hooks_pb2.PausedPlugin:
    return hooks_pb2.PausedPlugin(plugin_id=pause.plugin_id, reason=pause.reason, faults=pause.faults, paused_at=pause.paused_at)

"""What a plugin's entry module (`server/index.py`) sees.

An entry module defines `register(covel)`; `covel` is a `PluginRegistrar`:

    def register(covel):
        covel.on("TurnStart", on_turn_start, timeout_ms=2000)

    async def on_turn_start(ctx, payload):
        if "forbidden" in payload["playerMessage"]:
            return {"action": "abort", "reason": "That is not allowed here."}
"""

from shared.plugin_sdk.context import CancellationSignal, ExecutionView, HookContext
from shared.plugin_sdk.frozen import freeze, thaw
from shared.plugin_sdk.private_payload import PrivatePayload, json_copy
from shared.plugin_sdk.registrar import HookRegistration, PluginRegistrar, ToolRegistration
from shared.plugin_sdk.tools import ToolContext, ToolError

__all__ = [
    "CancellationSignal",
    "ExecutionView",
    "HookContext",
    "HookRegistration",
    "PluginRegistrar",
    "PrivatePayload",
    "ToolContext",
    "ToolError",
    "ToolRegistration",
    "freeze",
    "json_copy",
    "thaw",
]

"""What the hooks service asks of every loaded plugin's hookspec adapter, in process or in a sandbox
worker: who hears of a refused tool call, and which replace decision answers a CallTool.
"""

from __future__ import annotations

import inspect
from typing import Any

from services.hooks.common.markers import MISSING, CallContext
from services.hooks.dispatcher import ExecutionContext, HandlerTable
from services.hooks.plugin_entries import LoadedPlugin
from shared.hook_events import EVENTS_BY_NAME
from shared.plugin_sdk import HookContext


def _loaded_adapters(loaded: list[LoadedPlugin], table: HandlerTable, execution: ExecutionContext) -> list[Any]:
    """The hookspec adapters whose PreToolUse handlers this execution runs (active, approved): a HookspecAdapter in
    this process (in_process.py) or a SandboxedHookspecs (its worker's)."""
    running = {handler.plugin_id for handler in table.handlers_for("PreToolUse", execution)}
    return [plugin.hookspecs for plugin in loaded if plugin.hookspecs is not None and plugin.entry.plugin_id in running]


async def tell_tool_refused(loaded: list[LoadedPlugin], table: HandlerTable, execution: ExecutionContext, payload: dict[str, Any],
                            reason: str) -> None:
    """After a PreToolUse dispatch that ended in abort: each hookspec plugin's after_tool_call hears of it."""
    view = execution.view(EVENTS_BY_NAME["PreToolUse"])
    for adapter in _loaded_adapters(loaded, table, execution):
        await adapter.tool_refused(HookContext(view, adapter.plugin_id), payload, reason)


async def find_replacement(loaded: list[LoadedPlugin], context: CallContext, call_id: str, name: str, arguments: str) -> tuple[Any] | None:
    """take_replacement for adapters that may live in a sandbox worker (their answer is awaited)."""
    for plugin in loaded:
        if plugin.hookspecs is not None:
            found = plugin.hookspecs.take_replacement(context, call_id, name, arguments)
            if inspect.isawaitable(found):
                found = await found
            if found is not MISSING:
                return (found,)
    return None


def take_replacement(loaded: list[LoadedPlugin], context: CallContext, call_id: str, name: str, arguments: str) -> tuple[Any] | None:
    """CallTool: (result,) when a hookspec plugin's replace decision answers this call; else None."""
    for plugin in loaded:
        if plugin.hookspecs is not None:
            found = plugin.hookspecs.take_replacement(context, call_id, name, arguments)
            if found is not MISSING:
                return (found,)
    return None

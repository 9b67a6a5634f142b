"""A sandboxed plugin's hookspec adapter, seen from the hooks service: the adapter lives in the plugin's
worker (hookspec_adapter.py there); this stand-in calls it through the worker's `hookspec`, `lifespans`
and `model_stream` operations (plugin_side/operations.py).
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from services.hooks.common.bounds import ADMIT_TIMEOUT_S
from services.hooks.common.markers import MISSING
from services.hooks.common.worker_messages import HookspecArgs, HookspecReply, ModelStreamArgs, ModelStreamReply, View
from services.hooks.worker_lifespans import WorkerLifespans
from shared.logs import get_logger
from shared.plugin_sdk import ExecutionView, HookContext
from shared.sandbox import PluginWorkers, RemoteError, Worker, WorkerGone

log = get_logger(component="hookspecs")


def view_of(view: ExecutionView) -> View:
    """What a worker is told of a hook's execution view (its settings go apart: the plugin's own only)."""
    return View(view.event, view.session_id, view.turn_id, view.locale, list(view.active_plugin_ids), view.plugin_id,
                view.runtime_id, view.logical_turn, view.execution_id, view.root_execution_id, view.subagent_call_id,
                view.parent_runtime_id)


class WorkerPlugin(Protocol):
    """One plugin's entry module in its workers at one catalogue generation (sandboxed_entries.SandboxedPlugin)."""

    plugin_id: str
    generation: int
    workers: PluginWorkers


class SandboxedHookspecs:
    """The plugin's hookspec adapter, which lives in its worker (services/hooks/plugin_side/hookspec_adapter.py)."""

    def __init__(self, plugin: WorkerPlugin, implemented: list[str]) -> None:
        self._plugin = plugin
        self.plugin_id = plugin.plugin_id
        self._implemented = {str(name) for name in implemented}
        self.plugin_tools: frozenset[tuple[str, str]] = frozenset()
        self.lifespans = WorkerLifespans(plugin, "provide_lifespan" in self._implemented)

    def implemented(self) -> set[str]:
        return set(self._implemented)

    async def _call(self, method: str, **args: Any) -> HookspecReply:
        return await self._plugin.workers.call("hookspec", HookspecArgs(method, self._plugin.generation, **args), reply=HookspecReply)

    async def share_tools(self, plugin_tools: frozenset[tuple[str, str]], worker: Worker | None = None) -> None:
        self.plugin_tools = plugin_tools
        args = HookspecArgs("plugin_tools", self._plugin.generation, tools=sorted(plugin_tools))
        await (worker.call("hookspec", args, reply=HookspecReply) if worker is not None
               else self._plugin.workers.call("hookspec", args, reply=HookspecReply))

    async def tool_refused(self, ctx: HookContext, payload: dict[str, Any], reason: str) -> None:
        view = ctx._view
        try:
            await self._call("tool_refused", view=view_of(view), settings=dict(view.plugin_settings.get(self._plugin.plugin_id, {})),
                             payload=payload, reason=reason)
        except (WorkerGone, RemoteError) as error:
            # Plugin code (its after_tool_call impls): the refusal stands whatever they do.
            log.warning("hookimpl.tool_refused_failed", plugin_id=self.plugin_id, error=f"{type(error).__name__}: {error}")

    async def take_replacement(self, context: Any, call_id: str, name: str, arguments: str) -> Any:
        fields = ("turn_id", "root_execution_id", "runtime_id", "execution_id")
        answer = await self._call("take_replacement", call_id=call_id, name=name, arguments=arguments,
                                  context={field: str(getattr(context, field, "") or "") for field in fields})
        return answer.v if answer.found else MISSING

    async def admit_message(self, session_id: str, message: dict[str, Any], turn: dict[str, Any]) -> Any:
        """AdmitMessage: the worker's admit_message decision ({action, reason} or None); the caller bounds the wait,
        the deadline lets the worker stop a late answer (services/hooks/admission.py)."""
        args = HookspecArgs("admit_message", self._plugin.generation, session_id=session_id, message=message, turn=turn)
        answer = await self._plugin.workers.call("hookspec", args, reply=HookspecReply, deadline=time.monotonic() + ADMIT_TIMEOUT_S)
        return answer.v

    async def stream_batch(self, stream_id: str, *, session_id: str, claim: bool, wait_s: float) -> Any:
        """StreamModelAnswer: the next batch of a run_model_stream kept open in the worker (services/hooks/plugin_side/model_streams.py;
        the worker's word: the caller checks it and bounds the wait)."""
        args = ModelStreamArgs("next", stream_id, session_id, claim, wait_s)
        return await self._plugin.workers.call("model_stream", args, reply=ModelStreamReply, deadline=time.monotonic() + wait_s)

    async def close_stream(self, stream_id: str) -> None:
        await self._plugin.workers.call("model_stream", ModelStreamArgs("close", stream_id), reply=ModelStreamReply)

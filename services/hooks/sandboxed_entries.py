"""Entry modules loaded in sandbox workers (shared/sandbox), one warm worker per plugin.

`load_sandboxed` gives the same LoadResult as entry_loader.load_entries, but every registration's
callable is a stand-in that calls the plugin's worker: the dispatcher, CallTool, CallService,
CallExtension and the event-key bus run them as they ran the plugin's own functions, under the
same timeouts and with the same statuses. What a worker answers is checked here as the plugin's
word (registrations through the registrar's own checks, results through the dispatcher's). A
worker that crashes or is stopped fails the calls in flight (status `error`, a fault of the
plugin); a fresh one loads the entry module again (and enters its lifespans) before it takes the
next call. A worker stopped on purpose leaves the plugin's lifespans first (its teardown); each
worker may write the plugin's session workspaces (provide_environment, environments.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any

from services.hooks.common.worker_messages import (
    EventArgs,
    EventReply,
    HookArgs,
    HookOutcome,
    LoadArgs,
    Registrations,
    ToolArgs,
    ToolCallContext,
    ToolReply,
)
from services.hooks.common.workspaces import workspace_root
from services.hooks.dispatcher import HandlerFailed, HandlerSkipped
from services.hooks.hook_state import StoreState, state_capability
from services.hooks.plugin_entries import (
    LoadedPlugin,
    LoadResult,
    PluginEntry,
    check_declarations,
    entry_problem,
    plugin_tools_of,
)
from services.hooks.sandboxed_batches import OVERRUN, HookBatches
from services.hooks.sandboxed_hookspecs import SandboxedHookspecs, view_of
from services.hooks.store_turns import with_turns
from shared.plugin_sdk import HookContext, PluginRegistrar
from shared.plugin_sdk.http_client import http_rules
from shared.plugin_sdk.registrar import RegistrationError
from shared.plugin_sdk.session_state import STATE_BACKEND
from shared.plugin_sdk.tools import ToolContext
from shared.sandbox import PluginWorkers, RemoteError, SandboxPool, Worker, WorkerGone
from shared.sandbox.operations import register_operations

# What this service's workers serve (plugin_side/operations.py), by name: the host never imports the plugin side.
WORKER_OPERATIONS = "services.hooks.plugin_side.operations"
# register(covel) and the imports before it, the worker's start included.
LOAD_TIMEOUT_S = 30.0


class _Stand:
    """A registration's stand-in: which plugin, generation and index it calls."""

    sandboxed = True

    def __init__(self, plugin: SandboxedPlugin, index: int) -> None:
        self.plugin = plugin
        self.index = index


class SandboxedHook(_Stand):
    def __init__(self, plugin: SandboxedPlugin, index: int, timeout_ms: int) -> None:
        super().__init__(plugin, index)
        self.timeout_ms = timeout_ms
        # What the dispatcher adds to a timeout's message (shared/sandbox/host.py replaces the worker).
        self.overrun_note = OVERRUN
        # The plugin's handlers of one event go to its worker together (dispatch_batches.py).
        self.batch = plugin.batches

    async def __call__(self, context: HookContext, payload: dict[str, Any]) -> Any:
        view = context._view
        args = HookArgs(self.index, view_of(view), payload, self.plugin.generation,
                        dict(view.plugin_settings.get(self.plugin.plugin_id, {})))
        backend = STATE_BACKEND.get()
        capabilities = state_capability(backend, view.session_id, self.plugin.plugin_id) if isinstance(backend, StoreState) else None
        try:
            answer = await self.plugin.workers.call("hook", args, reply=HookOutcome, capabilities=capabilities,
                                                    deadline=time.monotonic() + self.timeout_ms / 1000)
        except WorkerGone as gone:
            raise HandlerFailed("error", f"failed: {gone}") from gone
        except RemoteError as error:
            raise HandlerFailed("invalid-result", f"returned a value that is not JSON data ({error})") from error
        if answer.status == "skip":
            raise HandlerSkipped
        if answer.status != "ok":
            raise HandlerFailed(answer.status if answer.status in ("error", "invalid-result") else "error", answer.message)
        return answer.v


class SandboxedTool(_Stand):
    """A tool, a service or an extension provider: `call(ctx, input)` with a ToolContext."""

    def __init__(self, plugin: SandboxedPlugin, index: int, kind: str, description: str = "", parameters: Any = None) -> None:
        super().__init__(plugin, index)
        self.kind = kind
        self.description = description
        self.parameters = parameters

    async def call(self, context: ToolContext, arguments: Any) -> Any:
        args = ToolArgs(self.kind, self.index, ToolCallContext(
            context.session_id, context.turn_id, context.locale, context.runtime_id or "", context.logical_turn or 0,
            context.turn_number), arguments, self.plugin.generation, dict(context._own_settings),
            {namespace: dict(values) for namespace, values in context._plugin_data.items()},
            dict(context._world_data) if context._world_data is not None else None,
            dict(context._session_view) if context._session_view is not None else None, context.random.snapshot())
        answer = await self.plugin.workers.call("tool", args, reply=ToolReply)
        for proposal in answer.proposals:
            # The same check as in the plugin's process: only the proposal types a tool may make.
            context.propose(proposal.type, proposal.payload)
        return answer.v


class SandboxedService(SandboxedTool):
    """`implementation.call` of a registered service (service_tool reads description and parameters)."""


class _NotJson:
    """What an event handler left as the context when it was not JSON (the bus undoes the change)."""


class SandboxedEventHandler(_Stand):
    async def call(self, event: Any) -> None:
        args = EventArgs(self.index, event.key, event.context, self.plugin.generation, event.session_key, float(event.timestamp or 0))
        # ctx.state of the event's session (a hookspec adapter reads the turn another replica began: turn_share.py).
        backend = STATE_BACKEND.get()
        capabilities = (state_capability(backend, event.session_key, self.plugin.plugin_id)
                        if isinstance(backend, StoreState) and event.session_key else None)
        if event.session_key and self.plugin.hookspecs is not None and "provide_tape_store" in self.plugin.hookspecs.implemented():
            # provide_tape_store fills a new tape from the committed turns of this event's session (tape_mirror.py).
            capabilities = with_turns(capabilities, event.session_key)
        try:
            answer = await self.plugin.workers.call("event", args, reply=EventReply, capabilities=capabilities)
        except RemoteError as error:
            if error.__class__.__name__ != "NotJson":
                raise
            event.context = _NotJson()
            return
        event.context = answer.context


class SandboxedPlugin:
    """One plugin's entry module in its worker, at one catalogue generation."""

    def __init__(self, workers: PluginWorkers, entry: PluginEntry, generation: int) -> None:
        self.workers = workers
        self.entry = entry
        self.plugin_id = entry.plugin_id
        self.generation = generation
        self.loaded: Registrations | None = None
        self.hookspecs: SandboxedHookspecs | None = None
        self.batches = HookBatches(self.plugin_id, workers, generation)
        data_dir = workers.pool.data_dir
        # The plugin's session workspaces (provide_environment): its workers may write there, and only there.
        self.workspaces = str(workspace_root(data_dir, self.plugin_id)) if data_dir is not None else None
        workers.writable = [self.workspaces] if self.workspaces else []
        # What its covel.http may reach, held by the host: the worker's own check is only the first.
        workers.http_rules = http_rules(entry.http_permissions)

    def _load_request(self) -> LoadArgs:
        return LoadArgs(str(self.entry.root_dir), self.entry.entry, self.generation, list(self.entry.http_permissions), self.workspaces)

    async def load(self) -> Registrations:
        answer = await asyncio.wait_for(self.workers.call("load", self._load_request(), reply=Registrations), LOAD_TIMEOUT_S)
        self.loaded = answer
        # A worker started after this one (a crash, a stop) loads the same entry before it serves.
        self.workers.setup = self.reload
        self.workers.teardown = self.tear_down
        return answer

    async def tear_down(self, worker: Worker) -> None:
        """The worker is stopped on purpose: the plugin's lifespans are left there first."""
        if self.hookspecs is not None and self.hookspecs.lifespans.implemented:
            await self.hookspecs.lifespans.leave_all(worker)

    async def reload(self, worker: Worker) -> None:
        answer = await asyncio.wait_for(worker.call("load", self._load_request(), reply=Registrations), LOAD_TIMEOUT_S)
        if answer != self.loaded:
            raise RuntimeError(f"{self.entry.entry} registered something else when its worker was started again")
        if self.hookspecs is not None:
            await self.hookspecs.share_tools(self.hookspecs.plugin_tools, worker)
            await self.hookspecs.lifespans.enter(worker=worker)

    def registrar(self, found: Registrations) -> PluginRegistrar:
        """The worker's registrations, through the registrar's own checks."""
        if found.error is not None:
            raise RegistrationError(found.error)
        registrar = PluginRegistrar(self.plugin_id, http_permissions=self.entry.http_permissions)
        for index, hook in enumerate(found.hooks):
            registrar.on(hook.event, SandboxedHook(self, index, hook.timeout_ms), match=hook.match, timeout_ms=hook.timeout_ms,
                         enforce=hook.enforce, observe=hook.observe)
            registrar.hooks[-1] = dataclasses.replace(registrar.hooks[-1], is_async=True, sandboxed=True)
        for index, tool in enumerate(found.tools):
            registrar.register_tool(tool.name, SandboxedTool(self, index, "tool").call, description=tool.description,
                                    parameters=_schema(tool.parameters), read_only=tool.read_only)
        for index, service in enumerate(found.services):
            stand: Any = SandboxedService(self, index, "service", service.description, service.parameters)
            if not service.callable:
                stand.call = None  # service_tool reports a service that is neither callable nor has call()
            registrar.register_service(service.contract, stand, model_facing=service.model_facing, access=service.access)
        for index, extension in enumerate(found.extensions):
            registrar.provide_extension(extension.point, extension.id, SandboxedTool(self, index, "extension").call,
                                        order=extension.order, slot=extension.slot)
        for index, handler in enumerate(found.event_handlers):
            registrar.on_event(handler.key, SandboxedEventHandler(self, index).call, timeout_ms=handler.timeout_ms)
        for index, rpc in enumerate(found.rpcs):
            registrar.register_rpc(rpc.action, SandboxedTool(self, index, "rpc").call, description=rpc.description)
        for index, form_id in enumerate(found.forms):
            registrar.register_form_validator(form_id, SandboxedTool(self, index, "form").call)
        if found.hookspecs is not None:
            self.hookspecs = SandboxedHookspecs(self, found.hookspecs)
        return registrar


def _schema(value: Any) -> dict[str, Any] | None:
    if value is not None and not isinstance(value, dict):
        raise RegistrationError(f"a tool's parameters must be a JSON Schema object, not {type(value).__name__}")
    return value


async def _load_one(pool: SandboxPool, plugin: PluginEntry, generation: int) -> LoadedPlugin | str | None:
    """The plugin loaded, or why it is not (None: no entry module and nothing declared)."""
    problem = entry_problem(plugin)
    if problem or not plugin.entry:
        return problem
    workers = pool.plugin(plugin.plugin_id, plugin.root_dir)
    sandboxed = SandboxedPlugin(workers, plugin, generation)
    try:
        registrar = sandboxed.registrar(await sandboxed.load())
        problem = check_declarations(plugin, registrar)
    except RegistrationError as error:
        message = str(error)
        problem = message if "failed to load" in message else f"{plugin.entry} failed to load: {message}"
    except TimeoutError:
        problem = f"{plugin.entry} failed to load: register(covel) did not return within {LOAD_TIMEOUT_S:g} s"
    except (WorkerGone, RemoteError) as error:
        problem = f"{plugin.entry} failed to load: {error}"
    if problem:
        # No worker is kept for a plugin that does not load.
        pool.forget(workers)
        return problem
    return LoadedPlugin(plugin, registrar, sandboxed.hookspecs)


async def load_sandboxed(pool: SandboxPool, plugins: list[PluginEntry], generation: int, *, retire: bool = True) -> LoadResult:
    """Every plugin's entry module, each in its worker (all at once); with `retire`, the workers of plugins not
    among them are retired (a whole generation); without it, the others' workers are left as they are (plugins a
    session approved, loaded alongside a generation's)."""
    # The operations these workers serve (the service registers them at its start; a pool made without it here).
    register_operations(WORKER_OPERATIONS)
    result = LoadResult()
    outcomes = await asyncio.gather(*(_load_one(pool, plugin, generation) for plugin in plugins))
    for plugin, outcome in zip(plugins, outcomes, strict=True):
        if isinstance(outcome, LoadedPlugin):
            result.loaded.append(outcome)
        elif outcome:
            result.errors[plugin.plugin_id] = outcome
    if not retire:
        return result
    await share_sandboxed_tools(result)
    kept = {(plugin.plugin_id, str(plugin.root_dir)) for plugin in plugins if plugin.entry}
    for workers in pool.plugins():
        if (workers.plugin_id, workers.root) not in kept:
            pool.forget(workers)
    return result


async def share_sandboxed_tools(result: LoadResult) -> None:
    """Every loaded plugin's tools, told to each sandboxed hookspec adapter (its replace(result) answers through CallTool)."""
    plugin_tools = plugin_tools_of(result)
    adapters = [hookspecs for hookspecs in (loaded.hookspecs for loaded in result.loaded) if isinstance(hookspecs, SandboxedHookspecs)]
    await asyncio.gather(*(adapter.share_tools(plugin_tools) for adapter in adapters), return_exceptions=True)

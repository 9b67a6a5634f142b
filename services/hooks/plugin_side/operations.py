"""What a sandbox worker does for the hooks service: load an entry module, and run what it
registered (hook handlers with their match, alone or a batch of them, tools, services, extension providers,
event-key handlers, hookspec bookkeeping, run_model_stream answers kept open), and enter and leave its
lifespans (lifespans.py). The service registers this module with the sandbox by name
(shared/sandbox/operations.py), so its zygote and workers import it and serve OPERATIONS.

Each operation's arguments and reply are the types of services/hooks/common/worker_messages.py; a hook's own
failure comes back in-band (HookOutcome) with the wording the dispatcher has always used, anything else a
plugin raises as the call's error.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from services.hooks.common.committed_turns import COMMITTED_TURNS
from services.hooks.common.markers import MISSING
from services.hooks.common.worker_messages import (
    EventArgs,
    EventHandlerInfo,
    EventReply,
    ExtensionInfo,
    HookArgs,
    HookInfo,
    HookOutcome,
    HooksArgs,
    HookspecArgs,
    HookspecReply,
    HooksReply,
    LifespansArgs,
    LifespansReply,
    LoadArgs,
    ModelStreamArgs,
    ObservedArgs,
    Proposal,
    Registrations,
    RpcInfo,
    ServiceInfo,
    ToolArgs,
    ToolInfo,
    ToolReply,
    View,
)
from services.hooks.plugin_side.entry_loader import EntryFailed, run_register
from services.hooks.plugin_side.hook_batches import batch_ended, run_batch
from services.hooks.plugin_side.model_streams import OPEN_STREAMS
from services.hooks.plugin_side.tape_mirror import WorkerTurns
from shared.plugin_sdk import ExecutionView, HookContext, PluginRegistrar, PrivatePayload
from shared.plugin_sdk.event_keys import InternalEvent
from shared.plugin_sdk.hook_match import DeclarativeMatch
from shared.plugin_sdk.seeded_random import SeededRandom
from shared.plugin_sdk.session_state import STATE_BACKEND
from shared.plugin_sdk.tools import ToolContext
from shared.sandbox.operations import Operation
from shared.sandbox.worker_server import Call, WorkerServer

# Generations a worker keeps loaded: the current one, and the one calls in flight may still use.
KEPT_GENERATIONS = 2


def _registrar(server: WorkerServer, gen: int | None) -> PluginRegistrar:
    loaded = server.state.get("generations", {}).get(gen)
    if loaded is None:
        raise LookupError(f"generation {gen} of {server.plugin_id} is not loaded in this worker")
    return loaded[0]


def _services(registrar: PluginRegistrar) -> list[ServiceInfo]:
    services = []
    for service in registrar.services:
        implementation = service.implementation
        services.append(ServiceInfo(
            service.contract, service.model_facing, service.access,
            callable(implementation) or callable(getattr(implementation, "call", None)),
            str(getattr(implementation, "description", "") or ""), getattr(implementation, "parameters", None)))
    return services


def _descriptors(registrar: PluginRegistrar, hookspecs: Any) -> Registrations:
    """What the host needs to know of each registration; the code stays here."""
    return Registrations(
        hooks=[HookInfo(h.event, h.timeout_ms, h.enforce, not h.is_async,
                        h.match.spec() if isinstance(h.match, DeclarativeMatch) else None, h.observe) for h in registrar.hooks],
        tools=[ToolInfo(t.name, t.description, t.parameters, t.read_only) for t in registrar.tools],
        services=_services(registrar),
        extensions=[ExtensionInfo(e.point, e.id, e.order, e.slot) for e in registrar.extensions],
        event_handlers=[EventHandlerInfo(e.key, e.timeout_ms) for e in registrar.event_handlers],
        rpcs=[RpcInfo(r.action, r.description) for r in registrar.rpcs],
        forms=[f.form_id for f in registrar.forms],
        hookspecs=sorted(hookspecs.implemented()) if hookspecs is not None else None,
    )


async def load(server: WorkerServer, call: Call, args: LoadArgs) -> Registrations:
    permissions = tuple((str(where), entry) for where, entry in args.http_permissions)
    root = Path(server.isolation.path_of(args.root))
    # The plugin's session workspaces, where this worker reaches them (provide_environment).
    workspaces = Path(server.isolation.path_of(args.workspaces)) if args.workspaces else None
    try:
        # Importing is blocking work: in a plugin thread (counted: a stop that finds it running replaces the worker).
        registrar, hookspecs = await server.run_plugin(call, run_register, server.plugin_id, root, args.entry,
                                                       args.gen, permissions, workspaces)
    except EntryFailed as failed:
        return Registrations(error=str(failed))
    generations = server.state.setdefault("generations", {})
    # Loaded again under the same generation (a Reload of an unchanged catalogue): the one replaced is unloaded.
    unloaded = [generations[args.gen]] if args.gen in generations else []
    generations[args.gen] = (registrar, hookspecs)
    server.state["loads"] = server.state.get("loads", 0) + 1
    server.state.setdefault("load_numbers", {})[args.gen] = server.state["loads"]
    unloaded.extend(generations.pop(old) for old in sorted(generations, key=lambda gen: gen or 0)[:-KEPT_GENERATIONS])
    for _, adapter in unloaded:
        if adapter is not None:
            _leave_later(server, adapter)
    return _descriptors(registrar, hookspecs)


def _leave_later(server: WorkerServer, adapter: Any) -> None:
    """An unloaded generation's lifespans are left in the background (bounded by Lifespans.leave)."""
    task = asyncio.get_running_loop().create_task(adapter.lifespans.leave())
    leaving = server.state.setdefault("leaving", set())
    leaving.add(task)
    task.add_done_callback(leaving.discard)


async def lifespans(server: WorkerServer, call: Call, args: LifespansArgs) -> LifespansReply:
    """provide_lifespan: `enter` one generation's (answers which load of it, and the impls entered); `leave` one
    generation's (only the load `load` names: a later load of the same generation is another), or every one's
    (no generation named)."""
    generations = server.state.get("generations", {})
    numbers = server.state.get("load_numbers", {})
    if args.action == "enter":
        adapter = generations.get(args.gen, (None, None))[1]
        if adapter is None:
            raise LookupError(f"{server.plugin_id} has no hookspec objects in generation {args.gen}")
        entered = await adapter.lifespans.enter(args.timeout_s or 30)
        return LifespansReply(numbers.get(args.gen), list(entered))
    if args.gen is not None or args.load is not None:
        chosen = [args.gen] if args.gen in generations and numbers.get(args.gen) == args.load else []
    else:
        chosen = list(generations)
    adapters = [generations[gen][1] for gen in chosen if generations[gen][1] is not None]
    await asyncio.gather(*(adapter.lifespans.leave(args.timeout_s or 5) for adapter in adapters))
    return LifespansReply()


def _hook_context(server: WorkerServer, call: Call, view: View, settings: dict[str, Any], *, part: bool = False) -> HookContext:
    context = HookContext(ExecutionView(
        view.event, view.session_id, view.turn_id, view.locale, tuple(view.active_plugin_ids), view.plugin_id,
        view.runtime_id, view.logical_turn, {server.plugin_id: settings}, view.execution_id, view.root_execution_id,
        view.subagent_call_id, view.parent_runtime_id), server.plugin_id)
    # The host's stop fires it (timeout or cancellation); a batch's handler has its own, which the stop fires too.
    context._signal = call.part_signal() if part else call.signal
    return context


class _WorkerState:
    """ctx.state in a sandbox worker: the host answers (services/hooks/hook_state.py state_capability)."""

    def __init__(self, server: WorkerServer, call: Call) -> None:
        self._server = server
        self._call = call

    async def access(self, session_id: str, plugin_id: str, op: str, key: str, value: Any = None) -> tuple[bool, Any]:
        answer = await self._server.host(self._call, "state", op, key, value)
        return bool(answer.get("found")), answer.get("v")


async def hook(server: WorkerServer, call: Call, args: HookArgs) -> HookOutcome:
    registration = _registrar(server, args.gen).hooks[args.i]
    payload = args.payload
    # A declarative match was tested by the host before the call came here.
    if registration.match is not None and not isinstance(registration.match, DeclarativeMatch):
        try:
            if not registration.match(PrivatePayload(payload)):
                return HookOutcome("skip")
        except Exception as error:
            return HookOutcome("error", message=f"match raised {type(error).__name__}: {error}")
    # ctx.state: asked of the hooks service, which binds this call's session and plugin.
    STATE_BACKEND.set(_WorkerState(server, call))
    context = _hook_context(server, call, args.view, args.settings)
    try:
        outcome = await server.run_plugin(call, registration.handler, context, PrivatePayload(payload))
    except Exception as error:  # plugin code
        return HookOutcome("error", message=f"raised {type(error).__name__}: {error}")
    return HookOutcome("ok", v=outcome)


async def hooks(server: WorkerServer, call: Call, args: HooksArgs) -> HooksReply:
    """A batch: several handlers of one event (plugin_side/hook_batches.py)."""
    registrar = _registrar(server, args.gen)
    registrations = [registrar.hooks[i] for i in args.items]
    STATE_BACKEND.set(_WorkerState(server, call))
    await run_batch(server, call, args, registrations,
                    [_hook_context(server, call, args.view, args.settings, part=True) for _ in registrations])
    return batch_ended(call)


async def observed(server: WorkerServer, call: Call, args: ObservedArgs) -> HooksReply:
    """DispatchObserved's watchers of this plugin: each held event's batch in turn."""
    STATE_BACKEND.set(_WorkerState(server, call))
    offset = 0
    for event in args.events:
        registrar = _registrar(server, event.gen)
        registrations = [registrar.hooks[i] for i in event.items]
        contexts = [_hook_context(server, call, event.view, event.settings, part=True) for _ in registrations]
        await run_batch(server, call, event, registrations, contexts, offset)
        offset += len(registrations)
    return batch_ended(call)


def _tool_function(registrar: PluginRegistrar, kind: str, index: int) -> Callable[..., Any]:
    if kind == "tool":
        return registrar.tools[index].handler
    if kind == "extension":
        return registrar.extensions[index].provider
    if kind == "form":
        return registrar.forms[index].validator
    if kind == "rpc":
        return registrar.rpcs[index].handler
    implementation = registrar.services[index].implementation
    return implementation if callable(implementation) else implementation.call


async def tool(server: WorkerServer, call: Call, args: ToolArgs) -> ToolReply:
    """A tool, a service or an extension provider: `function(ctx, input)` with a ToolContext."""
    function = _tool_function(_registrar(server, args.gen), args.kind, args.i)
    ctx = args.ctx
    context = ToolContext(session_id=ctx.session_id, turn_id=ctx.turn_id, locale=ctx.locale, runtime_id=ctx.runtime_id,
                          logical_turn=ctx.logical_turn, turn_number=ctx.turn_number, signal=call.signal,
                          _own_settings=args.settings, _plugin_data=args.data, _world_data=args.world, _session_view=args.session)
    if args.random:
        context.random = SeededRandom.restore(args.random)
    outcome = await server.run_plugin(call, function, context, args.input)
    return ToolReply(outcome, [Proposal(proposal["type"], proposal["payload"]) for proposal in context.proposals])


async def event(server: WorkerServer, call: Call, args: EventArgs) -> EventReply:
    registration = _registrar(server, args.gen).event_handlers[args.i]
    handed = InternalEvent(key=args.key, session_key=args.session_key, context=args.context, timestamp=args.timestamp)
    if handed.session_key:
        STATE_BACKEND.set(_WorkerState(server, call))
        # provide_tape_store's fill of a new tape: the host reads the committed turns of this event's session.
        COMMITTED_TURNS.set(WorkerTurns(lambda op, *values: server.host(call, op, *values)))
    await server.run_plugin(call, registration.handler, handed)
    return EventReply(handed.context)


async def hookspec(server: WorkerServer, call: Call, args: HookspecArgs) -> HookspecReply:
    adapter = server.state.get("generations", {}).get(args.gen, (None, None))[1]
    if adapter is None:
        raise LookupError(f"{server.plugin_id} has no hookspec objects in generation {args.gen}")
    method = args.method
    if method == "plugin_tools":
        adapter.plugin_tools = frozenset((str(plugin), str(name)) for plugin, name in args.tools)
        return HookspecReply()
    if method == "tool_refused" and args.view is not None:
        await adapter.tool_refused(_hook_context(server, call, args.view, args.settings), args.payload, args.reason)
        return HookspecReply()
    if method == "take_replacement":
        found = adapter.take_replacement(SimpleNamespace(**args.context), args.call_id, args.name, args.arguments)
        return HookspecReply() if found is MISSING else HookspecReply(True, found)
    if method == "admit_message":
        return HookspecReply(v=await adapter.admit_message(args.session_id, args.message, args.turn))
    raise LookupError(f"no hookspec method {method!r}")


async def model_stream(server: WorkerServer, call: Call, args: ModelStreamArgs) -> dict[str, Any]:
    """A run_model_stream answer kept open in this worker (plugin_side/model_streams.py): its next batch, or closed.
    Not per generation: a stream opened before a reload is read to its end."""
    if args.method == "close":
        OPEN_STREAMS.close(server.plugin_id, args.stream_id)
        return {}
    return await OPEN_STREAMS.next_batch(server.plugin_id, args.stream_id, session_id=args.session_id,
                                         claim=args.claim, wait_s=args.wait_s)


OPERATIONS: dict[str, Operation] = {
    "load": Operation(load, LoadArgs), "lifespans": Operation(lifespans, LifespansArgs), "hook": Operation(hook, HookArgs),
    "hooks": Operation(hooks, HooksArgs), "observed": Operation(observed, ObservedArgs), "tool": Operation(tool, ToolArgs), "event": Operation(event, EventArgs),
    "hookspec": Operation(hookspec, HookspecArgs), "model_stream": Operation(model_stream, ModelStreamArgs),
}

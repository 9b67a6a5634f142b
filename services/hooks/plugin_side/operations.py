"""What a sandbox worker does for the hooks service: load an entry module, and run what it
registered (hook handlers with their match, tools, services, extension providers, event-key
handlers, hookspec bookkeeping, run_model_stream answers kept open), and enter and leave its lifespans
(lifespans.py). The service registers this module with the sandbox (shared/sandbox/operations.py), so
its zygote and workers import it and serve OPERATIONS.

Each answer is plain data; a hook's own failure comes back in-band ({failed, message}) with the
wording the dispatcher has always used, anything else a plugin raises as the call's error.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from services.hooks.common.committed_turns import COMMITTED_TURNS
from services.hooks.common.markers import MISSING
from services.hooks.plugin_side.entry_loader import EntryFailed, run_register
from services.hooks.plugin_side.model_streams import OPEN_STREAMS
from services.hooks.plugin_side.tape_mirror import WorkerTurns
from shared.plugin_sdk import ExecutionView, HookContext, PluginRegistrar, PrivatePayload
from shared.plugin_sdk.event_keys import InternalEvent
from shared.plugin_sdk.hook_match import DeclarativeMatch
from shared.plugin_sdk.session_state import STATE_BACKEND
from shared.plugin_sdk.tools import ToolContext
from shared.sandbox.worker_server import Call, Operation, WorkerServer

# Generations a worker keeps loaded: the current one, and the one calls in flight may still use.
KEPT_GENERATIONS = 2


def _registrar(server: WorkerServer, args: dict[str, Any]) -> PluginRegistrar:
    loaded = server.state.get("generations", {}).get(args.get("gen"))
    if loaded is None:
        raise LookupError(f"generation {args.get('gen')} of {server.plugin_id} is not loaded in this worker")
    return loaded[0]


def _descriptors(registrar: PluginRegistrar, hookspecs: Any) -> dict[str, Any]:
    """What the host needs to know of each registration; the code stays here."""
    services = []
    for service in registrar.services:
        implementation = service.implementation
        services.append({
            "contract": service.contract, "model_facing": service.model_facing, "access": service.access,
            "callable": callable(implementation) or callable(getattr(implementation, "call", None)),
            "description": str(getattr(implementation, "description", "") or ""),
            "parameters": getattr(implementation, "parameters", None),
        })
    return {
        "hooks": [{"event": h.event, "timeout_ms": h.timeout_ms, "enforce": h.enforce, "in_thread": not h.is_async,
                   "match": h.match.spec() if isinstance(h.match, DeclarativeMatch) else None, "observe": h.observe}
                  for h in registrar.hooks],
        "tools": [{"name": t.name, "description": t.description, "parameters": t.parameters, "read_only": t.read_only}
                  for t in registrar.tools],
        "services": services,
        "extensions": [{"point": e.point, "id": e.id, "order": e.order, "slot": e.slot} for e in registrar.extensions],
        "event_handlers": [{"key": e.key, "timeout_ms": e.timeout_ms} for e in registrar.event_handlers],
        "rpcs": [{"action": r.action, "description": r.description} for r in registrar.rpcs],
        "forms": [f.form_id for f in registrar.forms],
        "hookspecs": sorted(hookspecs.implemented()) if hookspecs is not None else None,
    }


async def load(server: WorkerServer, call: Call, args: dict[str, Any]) -> dict[str, Any]:
    permissions = tuple((str(where), entry) for where, entry in args.get("http_permissions") or [])
    root = Path(server.isolation.path_of(str(args["root"])))
    # The plugin's session workspaces, where this worker reaches them (provide_environment).
    workspaces = Path(server.isolation.path_of(str(args["workspaces"]))) if args.get("workspaces") else None
    try:
        # Importing is blocking work: in a plugin thread (counted: a stop that finds it running replaces the worker).
        registrar, hookspecs = await server.run_plugin(call, run_register, server.plugin_id, root, str(args["entry"]),
                                                       args.get("gen"), permissions, workspaces)
    except EntryFailed as failed:
        return {"error": str(failed)}
    generations = server.state.setdefault("generations", {})
    # Loaded again under the same generation (a Reload of an unchanged catalogue): the one replaced is unloaded.
    unloaded = [generations[args.get("gen")]] if args.get("gen") in generations else []
    generations[args.get("gen")] = (registrar, hookspecs)
    server.state["loads"] = server.state.get("loads", 0) + 1
    server.state.setdefault("load_numbers", {})[args.get("gen")] = server.state["loads"]
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


async def lifespans(server: WorkerServer, call: Call, args: dict[str, Any]) -> dict[str, Any]:
    """provide_lifespan: `enter` one generation's (answers which load of it, and the impls entered); `leave` one
    generation's (only the load `load` names: a later load of the same generation is another), or every one's."""
    generations = server.state.get("generations", {})
    numbers = server.state.get("load_numbers", {})
    if args.get("action") == "enter":
        adapter = generations.get(args.get("gen"), (None, None))[1]
        if adapter is None:
            raise LookupError(f"{server.plugin_id} has no hookspec objects in generation {args.get('gen')}")
        entered = await adapter.lifespans.enter(float(args.get("timeout_s") or 30))
        return {"load": numbers.get(args.get("gen")), "entered": entered}
    if "gen" in args:
        chosen = [args["gen"]] if args["gen"] in generations and numbers.get(args["gen"]) == args.get("load") else []
    else:
        chosen = list(generations)
    adapters = [generations[gen][1] for gen in chosen if generations[gen][1] is not None]
    await asyncio.gather(*(adapter.lifespans.leave(float(args.get("timeout_s") or 5)) for adapter in adapters))
    return {}


def _hook_context(server: WorkerServer, call: Call, args: dict[str, Any]) -> HookContext:
    view = dict(args["view"])
    view["active_plugin_ids"] = tuple(view.get("active_plugin_ids") or ())
    context = HookContext(ExecutionView(**view, plugin_settings={server.plugin_id: args.get("settings") or {}}),
                          server.plugin_id)
    # The host's stop fires it (timeout or cancellation).
    context._signal = call.signal
    return context


class _WorkerState:
    """ctx.state in a sandbox worker: the host answers (services/hooks/hook_state.py state_capability)."""

    def __init__(self, server: WorkerServer, call: Call) -> None:
        self._server = server
        self._call = call

    async def access(self, session_id: str, plugin_id: str, op: str, key: str, value: Any = None) -> tuple[bool, Any]:
        answer = await self._server.host(self._call, "state", op, key, value)
        return bool(answer.get("found")), answer.get("v")


async def hook(server: WorkerServer, call: Call, args: dict[str, Any]) -> dict[str, Any]:
    registration = _registrar(server, args).hooks[int(args["i"])]
    payload = args.get("payload") or {}
    # A declarative match was tested by the host before the call came here.
    if registration.match is not None and not isinstance(registration.match, DeclarativeMatch):
        try:
            if not registration.match(PrivatePayload(payload)):
                return {"skip": True}
        except Exception as error:
            return {"failed": "error", "message": f"match raised {type(error).__name__}: {error}"}
    # ctx.state: asked of the hooks service, which binds this call's session and plugin.
    STATE_BACKEND.set(_WorkerState(server, call))
    try:
        outcome = await server.run_plugin(call, registration.handler, _hook_context(server, call, args), PrivatePayload(payload))
    except Exception as error:  # plugin code
        return {"failed": "error", "message": f"raised {type(error).__name__}: {error}"}
    return {"v": outcome}


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


async def tool(server: WorkerServer, call: Call, args: dict[str, Any]) -> dict[str, Any]:
    """A tool, a service or an extension provider: `function(ctx, input)` with a ToolContext."""
    function = _tool_function(_registrar(server, args), str(args["kind"]), int(args["i"]))
    context = ToolContext(**args["ctx"], signal=call.signal, _own_settings=args.get("settings") or {},
                          _plugin_data=args.get("data") or {})
    outcome = await server.run_plugin(call, function, context, args.get("input"))
    return {"v": outcome, "proposals": context.proposals}


async def event(server: WorkerServer, call: Call, args: dict[str, Any]) -> dict[str, Any]:
    registration = _registrar(server, args).event_handlers[int(args["i"])]
    handed = InternalEvent(key=str(args["key"]), session_key=args.get("session_key"), context=args.get("context") or {},
                           timestamp=float(args.get("timestamp") or 0))
    if handed.session_key:
        STATE_BACKEND.set(_WorkerState(server, call))
        # provide_tape_store's fill of a new tape: the host reads the committed turns of this event's session.
        COMMITTED_TURNS.set(WorkerTurns(lambda op, *values: server.host(call, op, *values)))
    await server.run_plugin(call, registration.handler, handed)
    return {"context": handed.context}


async def hookspec(server: WorkerServer, call: Call, args: dict[str, Any]) -> dict[str, Any]:
    adapter = server.state.get("generations", {}).get(args.get("gen"), (None, None))[1]
    if adapter is None:
        raise LookupError(f"{server.plugin_id} has no hookspec objects in generation {args.get('gen')}")
    method = args["method"]
    if method == "plugin_tools":
        adapter.plugin_tools = frozenset((str(plugin), str(name)) for plugin, name in args["tools"])
        return {}
    if method == "tool_refused":
        await adapter.tool_refused(_hook_context(server, call, args), args.get("payload") or {}, str(args.get("reason") or ""))
        return {}
    if method == "take_replacement":
        found = adapter.take_replacement(SimpleNamespace(**args["context"]), str(args["call_id"]), str(args["name"]),
                                         str(args.get("arguments") or ""))
        return {"found": False} if found is MISSING else {"found": True, "v": found}
    if method == "admit_message":
        return {"v": await adapter.admit_message(str(args["session_id"]), args.get("message") or {}, args.get("turn") or {})}
    raise LookupError(f"no hookspec method {method!r}")


async def model_stream(server: WorkerServer, call: Call, args: dict[str, Any]) -> dict[str, Any]:
    """A run_model_stream answer kept open in this worker (services/hooks/plugin_side/model_streams.py): its next batch, or closed.
    Not per generation: a stream opened before a reload is read to its end."""
    if args.get("method") == "close":
        OPEN_STREAMS.close(server.plugin_id, str(args["stream_id"]))
        return {}
    return await OPEN_STREAMS.next_batch(server.plugin_id, str(args["stream_id"]), session_id=str(args.get("session_id") or ""),
                                         claim=args.get("claim") is True, wait_s=float(args["wait_s"]))


OPERATIONS: dict[str, Operation] = {
    "load": load, "lifespans": lifespans, "hook": hook, "tool": tool, "event": event, "hookspec": hookspec,
    "model_stream": model_stream,
}

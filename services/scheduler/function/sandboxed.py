"""Function handlers and guards in a sandbox worker of their plugin (shared/sandbox).

The handler's ctx is sent as plain data (shared/sandbox/function_context.py rebuilds it there);
what needs the kernel comes back as calls that run here, on the scheduler's own FunctionContext,
with the checks it always had: plugin data, the session, tools, services, the gateway, subagents,
progress and nested runs. ctx.propose and ctx.emit_event arrive as notes, in order. The time limit
starts once the plugin's worker is up; past it the call is stopped there (a handler that runs on
in a thread gets its worker replaced and killed), and the runtime fails as it always did.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from services.scheduler.execution.outcome import OutcomeStatus
from services.scheduler.function import runtime
from services.scheduler.function.runtime import FunctionContext, FunctionOutcome, outcome_of
from shared.logs import get_logger
from shared.plugin_code import PluginFile
from shared.plugin_sdk import json_copy, thaw
from shared.plugin_sdk.http_client import HttpRule
from shared.sandbox import SandboxPool, WorkerGone
from shared.sandbox.function_context import FunctionArgs, FunctionReply
from shared.sandbox.host import sandbox_pool

log = get_logger(component="function_runtime")
_ABSENT = object()
_pools: dict[asyncio.AbstractEventLoop, SandboxPool | None] = {}


def function_pool() -> SandboxPool | None:
    """The scheduler's pool (COVEL_SANDBOX_*; None when the sandbox is off), one per event loop."""
    loop = asyncio.get_running_loop()
    if loop not in _pools:
        for stale in [other for other in _pools if other.is_closed()]:
            del _pools[stale]
        _pools[loop] = sandbox_pool("scheduler")
    return _pools[loop]


def prewarm_function_pool() -> None:
    """Start the pool's zygote now when called on a running event loop (no-op otherwise, or with the sandbox off)."""
    try:
        pool = function_pool()
    except RuntimeError:  # no running loop: the pool starts at the first handler
        return
    if pool is not None:
        pool.prewarm()


async def close_function_pool() -> None:
    pool = _pools.pop(asyncio.get_running_loop(), None)
    if pool is not None:
        await pool.close()


def _world(world: Any) -> dict[str, Any] | None:
    """ctx.world as plain values, only encoded (a WorldView's are shared with the turn's other views: not copied);
    the worker notes which parts the handler reads (`world_read`)."""
    if world is None:
        return None
    if hasattr(world, "wire_data"):
        return world.wire_data()
    return {name: thaw(getattr(world, name, None)) for name in ("characterSchema", "characters", "dimensions", "seats", "worldRecord")}


def _http(context: FunctionContext) -> list[list[Any]]:
    """ctx.http's rules as permissions.http entries (a declaration that does not parse allows nothing)."""
    if context.http is None:
        return []
    try:
        rules = context.http.rules
    except ValueError:
        return []
    return [["permissions.http", {"origin": rule.origin, **({"methods": sorted(rule.methods)} if rule.methods else {})}]
            for rule in rules]


def _rules(context: FunctionContext) -> tuple[HttpRule, ...]:
    """ctx.http's rules, checked by the sandbox's host for every request the handler's worker sends."""
    try:
        return tuple(context.http.rules) if context.http is not None else ()
    except ValueError:
        return ()


def context_data(context: FunctionContext) -> dict[str, Any]:
    present = [name for name in ("tools", "services", "gateway", "agents", "progress") if getattr(context, name) is not None]
    agents = context.agents
    # Thawed: frozen views (inputs) go as plain JSON; ctx.world is plain already (_world).
    data: dict[str, Any] = thaw({
        "runtime_id": context.runtime_id, "plugin_id": context.plugin_id, "inputs": dict(context.inputs),
        "player_message": context.player_message, "player_actions": list(context.player_actions),
        "logical_turn": context.logical_turn, "execution": dict(context.execution), "recursion_depth": context.recursion_depth,
        "random": context.random.snapshot(), "user_settings": dict(context.user_settings),
        "activation": dict(context.activation), "session": dict(context.session or {}), "deadline": context.deadline,
        "messages": dict(context.messages),
        "http": _http(context), "capabilities": present,
        "gateway_slot": getattr(context.gateway, "slot", "plugin"),
        "agent_targets": list(agents.targets()) if agents is not None and hasattr(agents, "targets") else [],
    })
    data["world"] = _world(context.world)
    return data


def _needs(context: FunctionContext, name: str) -> Any:
    found = getattr(context, name)
    if found is None:
        raise LookupError(f"ctx.{name} is not available to this runtime")
    return found


async def _get(read: Callable[..., Awaitable[Any]], namespace: Any, key: Any) -> dict[str, Any]:
    value = await read(namespace, key, _ABSENT)
    return {"found": False, "v": None} if value is _ABSENT else {"found": True, "v": value}


def capabilities(context: FunctionContext) -> Callable[[str, list[Any], dict[str, Any]], Awaitable[Any]]:
    """The ctx calls a worker may make for this handler, each run on the scheduler's own ctx."""
    data = context.plugin_data
    table: dict[str, Callable[..., Awaitable[Any]]] = {
        "plugin_data.get": lambda namespace, key: _get(data.get, namespace, key),
        "plugin_data.list": data.list, "plugin_data.set": data.set, "plugin_data.delete": data.delete,
        "plugin_data.update": data.update,
        "store.get_session": lambda: _thawed(_needs(context, "store").get_session()),
        "tools.call": lambda *a, **k: _needs(context, "tools").call(*a, **k),
        "services.call": lambda *a, **k: _needs(context, "services").call(*a, **k),
        "gateway.generate_text": lambda *a, **k: _needs(context, "gateway").generate_text(*a, **k),
        "gateway.generate_object": lambda *a, **k: _needs(context, "gateway").generate_object(*a, **k),
        "gateway.evaluate": lambda *a, **k: _needs(context, "gateway").evaluate(*a, **k),
        "agents.run": lambda *a, **k: _needs(context, "agents").run(*a, **k),
        "progress.report": lambda *a, **k: _needs(context, "progress").report(*a, **k),
        "progress.finish": lambda *a, **k: _needs(context, "progress").finish(*a, **k),
        "recursive_call": lambda *a, **k: context.recursive_call(*a, **k),
        "history_for": lambda *a, **k: _needs(context, "history_for")(*a, **k),
    }

    async def run(op: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        found = table.get(op)
        if found is None:
            raise LookupError(f"ctx has no {op}")
        return json_copy(await found(*args, **kwargs))

    return run


async def _thawed(value: Awaitable[Any]) -> Any:
    return thaw(await value)


def notes(context: FunctionContext) -> Callable[[str, list[Any]], None]:
    def apply(op: str, args: list[Any]) -> None:
        try:
            if op == "propose" and len(args) == 2:
                context.propose(str(args[0]), args[1])
            elif op == "emit_event" and len(args) == 2:
                context.emit_event(args[0], args[1])
            elif op == "world_read" and len(args) == 1 and hasattr(context.world, "note_read"):
                context.world.note_read(str(args[0]))
            else:
                raise ValueError(f"no note {op!r} with {len(args)} arguments")
        except Exception as error:
            # Checked in the worker already: only a worker that forged its note (or a host bug) gets here.
            log.warning("function.note_refused", runtime_id=context.runtime_id, error=f"{type(error).__name__}: {error}")

    return apply


async def run_sandboxed(pool: SandboxPool, context: FunctionContext, code: PluginFile, limit_ms: int,
                        entry: str = "handler", turn_id: str | None = None) -> FunctionOutcome:
    """run_function's sandboxed path: the same outcomes and reasons."""
    started = time.monotonic()

    def finished(outcome: FunctionOutcome) -> FunctionOutcome:
        outcome.duration_ms = int((time.monotonic() - started) * 1000)
        return outcome

    try:
        worker = await pool.plugin(code.plugin_id, code.root).worker()
    except WorkerGone as gone:
        return finished(FunctionOutcome(OutcomeStatus.FAILED, f"handler failed: {gone}"))
    context.deadline = time.monotonic() + limit_ms / 1000
    args = FunctionArgs(str(code.root), code.relative, context_data(context), entry, turn_id)
    try:
        reply = await asyncio.wait_for(
            worker.call("function", args, reply=FunctionReply, capabilities=capabilities(context), notes=notes(context),
                        deadline=context.deadline, http=_rules(context)),
            limit_ms / 1000)
    except asyncio.CancelledError:
        context.signal.abort("cancelled")
        raise
    except TimeoutError:
        context.signal.abort("timeout")
        return finished(FunctionOutcome(OutcomeStatus.FAILED, f"function.timeoutMs: the handler did not finish within {limit_ms} ms"))
    except WorkerGone as gone:
        return finished(FunctionOutcome(OutcomeStatus.FAILED, f"handler failed: {gone}"))
    except Exception as error:
        log.warning("function.failed", runtime_id=context.runtime_id, error=repr(error))
        return finished(FunctionOutcome(OutcomeStatus.FAILED, f"handler raised {type(error).__name__}: {error}"))
    return finished(outcome_of(context, msgspec.to_builtins(reply)))


async def run_function(context: FunctionContext, code: PluginFile, limit_ms: int, entry: str = "handler",
                       turn_id: str | None = None) -> FunctionOutcome:
    """A handler (or guard) in its plugin's sandbox worker; in this process when the sandbox is off.
    `limit_ms`: the compiled function.timeoutMs (a guard: guardTimeoutMs). Loads of one `turn_id` check
    the plugin's files for edits once (shared/plugin_code/loader.py: epoch)."""
    pool = function_pool()
    if pool is None:
        return await runtime.run_function(context, code, limit_ms, entry, turn_id)
    return await run_sandboxed(pool, context, code, limit_ms, entry, turn_id)

"""Hook dispatch cost: in process per event and per handler, one gRPC round trip, pluggy and Bub.

`python -m bench.hook_dispatch`: first the headline, in one run: PreToolUse (a guard event:
sequential, fail-closed, each handler under its timeout) dispatched in process to 5 `async def`
handlers that let the call proceed, against pluggy calling 5 hookimpls and Bub's
`before_tool_call` guard with 5 hookimpls (bench/bub_hooks.py, in Bub's venv when there is one:
Bub needs Python >= 3.12). Each is the best of a few runs (the machine is shared).
Then 5 plain-function handlers on TurnStart (sequential guard event) and on TurnStop
(parallel), and 5 `async def` handlers. A plain function runs in a plugin thread
(docs/hooks.md), so its figure is mostly the thread hop; an async one runs on the loop.
Writes bench/results/hook_dispatch.json.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import tempfile
import time
from pathlib import Path

import pluggy

from bench.bub_compare import bub_python
from services.hooks.dispatcher import ExecutionContext, HandlerTable, dispatch
from shared.plugin_sdk import PluginRegistrar

RESULTS = Path(__file__).parent / "results"
BUB_SCRIPT = Path(__file__).with_name("bub_hooks.py")
HANDLERS = 5
# Runs per headline figure; the best one counts.
REPEATS = 5
PAYLOAD = {
    "playerMessage": "I open the door and step into the hall.",
    "actions": [{"seatId": "main", "kind": "do", "text": "I open the door and step into the hall.", "source": "player"}],
    "activeRuntimes": ["narrator", "guide", "dice-check/roller"],
}


TOOL_CALL = {"toolCall": {"id": "call-1", "name": "roll_dice", "arguments": {"sides": 20, "count": 1}}}
# A runtime-scoped event's context: the agent loop's, as the scheduler sends it.
AGENT_STEP = ExecutionContext("s", "t", "en", ("bench",), plugin_id="bench", runtime_id="narrator", logical_turn=3,
                              execution_id="run-1", root_execution_id="run-1")


def continue_handler(ctx, payload):
    return None


async def async_continue_handler(ctx, payload):
    return None


def build_table(count: int, event: str, handler=continue_handler) -> HandlerTable:
    registrar = PluginRegistrar("bench")
    for _ in range(count):
        registrar.on(event, handler)
    return HandlerTable(registrar.hooks, {"bench": "builtin"})


async def per_event_us(event: str, count: int, rounds: int, handler=continue_handler) -> float:
    table = build_table(count, event, handler)
    execution = ExecutionContext("s", "t", "en", ("bench",))
    for _ in range(200):
        await dispatch(table, event, execution, PAYLOAD)
    started = time.perf_counter()
    for _ in range(rounds):
        await dispatch(table, event, execution, PAYLOAD)
    return (time.perf_counter() - started) / rounds * 1e6


async def pre_tool_use_us(rounds: int) -> float:
    """PreToolUse to 5 `async def` handlers, default timeouts, fail-closed: the best of REPEATS runs."""
    table = build_table(HANDLERS, "PreToolUse", async_continue_handler)
    for _ in range(1000):
        await dispatch(table, "PreToolUse", AGENT_STEP, TOOL_CALL)
    best = float("inf")
    for _ in range(REPEATS):
        started = time.perf_counter()
        for _ in range(rounds):
            await dispatch(table, "PreToolUse", AGENT_STEP, TOOL_CALL)
        best = min(best, (time.perf_counter() - started) / rounds * 1e6)
    return best


def bub_before_tool_call(rounds: int) -> dict:
    """Bub's before_tool_call with 5 hookimpls in its own interpreter, or why it was skipped."""
    python = bub_python()
    if python is None:
        return {"skipped": "Bub is not installed: it needs Python >= 3.12 (make .venv/bub/.installed builds .venv/bub)"}
    done = subprocess.run([python, str(BUB_SCRIPT), "--rounds", str(rounds)], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"Bub's before_tool_call bench failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def pluggy_best_us(rounds: int) -> float:
    return min(pluggy_us(rounds) for _ in range(REPEATS))


def pluggy_us(rounds: int) -> float:
    hookspec = pluggy.HookspecMarker("bench")
    hookimpl = pluggy.HookimplMarker("bench")

    class Spec:
        @hookspec
        def turn_start(self, ctx, payload):
            """A turn starts."""

    manager = pluggy.PluginManager("bench")
    manager.add_hookspecs(Spec)
    for index in range(HANDLERS):
        plugin = type(f"Impl{index}", (), {"turn_start": hookimpl(lambda self, ctx, payload: None)})()
        manager.register(plugin, name=f"impl{index}")
    for _ in range(1000):
        manager.hook.turn_start(ctx=None, payload=PAYLOAD)
    started = time.perf_counter()
    for _ in range(rounds):
        manager.hook.turn_start(ctx=None, payload=PAYLOAD)
    return (time.perf_counter() - started) / rounds * 1e6


async def grpc_round_trip_us(rounds: int) -> float:
    from covel.hooks.v1 import hooks_pb2, hooks_pb2_grpc
    from services.hooks.server import start as start_hooks
    from services.hooks.settings import HooksSettings
    from services.registry.server import start as start_registry
    from services.registry.settings import RegistrySettings
    from shared.structs import to_struct
    from tests.conftest import free_addr
    from tests.support.identities import channel_as, service_tls

    with tempfile.TemporaryDirectory() as folder:
        package = Path(folder) / "bench"
        (package / "server").mkdir(parents=True)
        (package / "PLUGIN.md").write_text("---\ncontributes:\n  hooks: [TurnStart]\n---\n")
        (package / "server" / "index.py").write_text(
            "def register(covel):\n" + "".join("    covel.on('TurnStart', lambda ctx, payload: None)\n" for _ in range(HANDLERS))
        )
        registry_addr, hooks_addr = free_addr(), free_addr()
        registry = await start_registry(RegistrySettings(registry_addr=registry_addr, plugin_dirs=[Path(folder)], **service_tls("registry")))
        hooks = await start_hooks(HooksSettings(registry_addr=registry_addr, hooks_addr=hooks_addr, **service_tls("hooks")))
        try:
            # As the scheduler, over mTLS: the way a turn dispatches.
            async with channel_as(hooks_addr, "scheduler") as channel:
                stub = hooks_pb2_grpc.HookDispatcherStub(channel)
                request = hooks_pb2.DispatchRequest(
                    event="TurnStart",
                    context=hooks_pb2.HookContext(session_id="s", turn_id="t", active_plugin_ids=["bench"], approved_plugin_ids=["bench"]),
                    payload=to_struct(PAYLOAD),
                )
                for _ in range(100):
                    await stub.Dispatch(request)
                started = time.perf_counter()
                for _ in range(rounds):
                    await stub.Dispatch(request)
                return (time.perf_counter() - started) / rounds * 1e6
        finally:
            await hooks.stop(0)
            await registry.stop(0)


async def measure() -> dict:
    rounds = 20_000
    # The headline first, the three back to back, so that they see the same load.
    pre_tool_use = await pre_tool_use_us(rounds)
    pluggy_best = pluggy_best_us(rounds)
    bub = bub_before_tool_call(rounds)
    empty = await per_event_us("TurnStart", 0, rounds)
    sequential = await per_event_us("TurnStart", HANDLERS, rounds)
    parallel = await per_event_us("TurnStop", HANDLERS, rounds)
    async_sequential = await per_event_us("TurnStart", HANDLERS, rounds, async_continue_handler)
    async_parallel = await per_event_us("TurnStop", HANDLERS, rounds, async_continue_handler)
    plug = pluggy_us(rounds * 5)
    round_trip = await grpc_round_trip_us(2000)
    return {
        "handlers": HANDLERS,
        "pre_tool_use_event_us": pre_tool_use,
        "pre_tool_use_pluggy_call_us": pluggy_best,
        "bub": bub,
        "no_handlers_event_us": empty,
        "sequential_event_us": sequential,
        "sequential_per_handler_us": (sequential - empty) / HANDLERS,
        "parallel_event_us": parallel,
        "parallel_per_handler_us": (parallel - empty) / HANDLERS,
        "async_sequential_event_us": async_sequential,
        "async_parallel_event_us": async_parallel,
        "pluggy_call_us": plug,
        "pluggy_per_hookimpl_us": plug / HANDLERS,
        "grpc_dispatch_round_trip_us": round_trip,
    }


def main() -> None:
    result = asyncio.run(measure())
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "hook_dispatch.json").write_text(json.dumps(result, indent=2))
    print_headline(result)
    ratio = result["sequential_per_handler_us"] / result["pluggy_per_hookimpl_us"]
    print(f"hook dispatch, {HANDLERS} plain-function handlers (µs)")
    print(f"  event with no handlers (in process)        {result['no_handlers_event_us']:8.2f}")
    print(f"  TurnStart, sequential: per event            {result['sequential_event_us']:8.2f}   per handler {result['sequential_per_handler_us']:6.2f}")
    print(f"  TurnStop, parallel:    per event            {result['parallel_event_us']:8.2f}   per handler {result['parallel_per_handler_us']:6.2f}")
    print(f"  async def, sequential: per event            {result['async_sequential_event_us']:8.2f}")
    print(f"  async def, parallel:   per event            {result['async_parallel_event_us']:8.2f}")
    print(f"  pluggy, 5 hookimpls:   per call             {result['pluggy_call_us']:8.2f}   per hookimpl {result['pluggy_per_hookimpl_us']:5.2f}")
    print(f"  sequential per handler / pluggy per hookimpl: {ratio:.1f}x")
    print(f"  one gRPC Dispatch round trip, 5 handlers    {result['grpc_dispatch_round_trip_us']:8.1f}")


def print_headline(result: dict) -> None:
    covel, plug, bub = result["pre_tool_use_event_us"], result["pre_tool_use_pluggy_call_us"], result["bub"]
    print(f"PreToolUse, {HANDLERS} handlers (async, in process, timeouts and fail-closed): {covel:.2f} µs per event")
    print(f"  pluggy, {HANDLERS} hookimpls (no timeouts, no fail-closed): {plug:.2f} µs per call   Covel / pluggy {covel / plug:.2f}x")
    if "skipped" in bub:
        print(f"  Bub before_tool_call, {HANDLERS} hookimpls: skipped, {bub['skipped']}")
    else:
        bub_us = bub["before_tool_call_us"]
        print(f"  {bub['framework']} before_tool_call, {HANDLERS} hookimpls (Python {bub['python']}): {bub_us:.2f} µs per call"
              f"   Covel / Bub {covel / bub_us:.2f}x")


if __name__ == "__main__":
    main()

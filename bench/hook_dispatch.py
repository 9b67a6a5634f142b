"""Hook dispatch cost: in process per event and per handler, one gRPC round trip, and pluggy.

`python -m bench.hook_dispatch`: 5 plain-function handlers on TurnStart (sequential guard
event) and on TurnStop (parallel), against pluggy calling 5 hookimpls, in the same run; and
5 `async def` handlers. A plain function runs in a plugin thread (docs/hooks.md), so its
figure is mostly the thread hop; an async one runs on the loop.
Writes bench/results/hook_dispatch.json.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from pathlib import Path

import pluggy

from services.hooks.dispatcher import ExecutionContext, HandlerTable, dispatch
from shared.plugin_sdk import PluginRegistrar

RESULTS = Path(__file__).parent / "results"
HANDLERS = 5
PAYLOAD = {
    "playerMessage": "I open the door and step into the hall.",
    "actions": [{"seatId": "main", "kind": "do", "text": "I open the door and step into the hall.", "source": "player"}],
    "activeRuntimes": ["narrator", "guide", "dice-check/roller"],
}


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
    empty = await per_event_us("TurnStart", 0, rounds)
    sequential = await per_event_us("TurnStart", HANDLERS, rounds)
    parallel = await per_event_us("TurnStop", HANDLERS, rounds)
    async_sequential = await per_event_us("TurnStart", HANDLERS, rounds, async_continue_handler)
    async_parallel = await per_event_us("TurnStop", HANDLERS, rounds, async_continue_handler)
    plug = pluggy_us(rounds * 5)
    round_trip = await grpc_round_trip_us(2000)
    return {
        "handlers": HANDLERS,
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


if __name__ == "__main__":
    main()

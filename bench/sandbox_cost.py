"""What the plugin sandbox adds: per hook call, per function runtime, and per worker start.

`python -m bench.sandbox_cost`: in one run, the same plugin code in this process and in its warm
sandbox worker (docs/security.md, "Plugin sandbox"): a TurnStart dispatch to 5 `async def` and to
5 plain-function handlers, a function runtime whose handler returns a value, and one that makes a
ctx.plugin_data.get (a call back to the scheduler); then how long a fresh worker takes (a fork of
the zygote, plus loading the entry module). Writes bench/results/sandbox_cost.json.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from pathlib import Path
from types import MappingProxyType

from bench.common import summarize, table, write_result
from services.hooks.dispatcher import ExecutionContext, HandlerTable, dispatch
from services.hooks.in_process import load_entries
from services.hooks.plugin_entries import PluginEntry
from services.hooks.sandboxed_entries import load_sandboxed
from services.scheduler.execution.plugin_data_view import PluginDataView
from services.scheduler.function import runtime
from services.scheduler.function.runtime import FunctionContext
from services.scheduler.function.sandboxed import run_sandboxed
from shared.plugin_code import PluginFile
from shared.plugin_sdk import CancellationSignal
from shared.plugin_sdk.seeded_random import SeededRandom
from shared.sandbox import SandboxPool, SandboxSettings

HANDLERS = 5
PAYLOAD = {
    "playerMessage": "I open the door and step into the hall.",
    "actions": [{"seatId": "main", "kind": "do", "text": "I open the door and step into the hall.", "source": "player"}],
    "activeRuntimes": ["narrator", "guide", "dice-check/roller"],
}
ENTRY = f'''
def register(covel):
    for _ in range({HANDLERS}):
        covel.on("TurnStart", on_async)
        covel.on("TurnStop", on_plain)

async def on_async(ctx, payload):
    return None

def on_plain(ctx, payload):
    return None
'''
HANDLER = '''
async def handler(ctx):
    return {"ok": True}

async def reads(ctx):
    return {"score": await ctx.plugin_data.get("scores", "ana", 0)}
'''


def write_plugin(folder: Path) -> Path:
    root = folder / "bench"
    (root / "server").mkdir(parents=True)
    (root / "server" / "index.py").write_text(ENTRY)
    (root / "handler.py").write_text(HANDLER)
    for path in (root, root / "server"):
        path.chmod(0o755)
    return root


def process_cpu_s(pid: int | None) -> float:
    """CPU seconds (user + system) of this process, or of process `pid` (a worker) from /proc."""
    if pid is None:
        return time.process_time()
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def per_dispatch_us(table_: HandlerTable, event: str, rounds: int, worker_pid: int | None = None) -> tuple[float, float]:
    """(wall µs, CPU µs of this process and the plugin's worker) per dispatch: on a loaded machine the wall time
    follows the machine's load, the CPU much less."""
    execution = ExecutionContext("s", "t", "en", ("bench",))
    for _ in range(50):
        await dispatch(table_, event, execution, PAYLOAD)
    started, cpu = time.perf_counter(), process_cpu_s(None) + (process_cpu_s(worker_pid) if worker_pid else 0.0)
    for _ in range(rounds):
        result = await dispatch(table_, event, execution, PAYLOAD)
        assert [entry.status for entry in result.trace] == ["ok"] * HANDLERS, result.trace
    used = process_cpu_s(None) + (process_cpu_s(worker_pid) if worker_pid else 0.0) - cpu
    return (time.perf_counter() - started) / rounds * 1e6, used / rounds * 1e6


def function_context() -> FunctionContext:
    async def committed(namespace):
        return {("scores", "ana"): 3}

    return FunctionContext(
        runtime_id="bench/r", plugin_id="bench", inputs=MappingProxyType({}), player_message="hi", player_actions=(),
        logical_turn=1, execution=MappingProxyType({"origin": "player"}), recursion_depth=0, random=SeededRandom("b"),
        plugin_data=PluginDataView("bench", committed), signal=CancellationSignal(), user_settings=MappingProxyType({}),
    )


async def per_function_us(run, code: PluginFile, entry: str, rounds: int) -> float:
    for _ in range(20):
        await run(function_context(), code, 5000, entry)
    started = time.perf_counter()
    for _ in range(rounds):
        outcome = await run(function_context(), code, 5000, entry)
        assert outcome.status == "success", outcome.reason
    return (time.perf_counter() - started) / rounds * 1e6


async def worker_start_ms(pool: SandboxPool, root: Path, starts: int) -> dict[str, float]:
    workers = pool.plugin("bench-start", root)
    took = []
    for _ in range(starts):
        current = workers.current
        if current is not None:
            current.kill("bench")
        started = time.perf_counter()
        await workers.call("load", {"root": str(root), "entry": "server/index.py", "gen": 1})
        took.append((time.perf_counter() - started) * 1000)
    return summarize(took)


async def measure(rounds: int = 2000) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        Path(folder).chmod(0o755)
        root = write_plugin(Path(folder))
        entry = PluginEntry("bench", root, "server/index.py", (("TurnStart", "normal"), ("TurnStop", "normal")), "builtin")
        pool = SandboxPool(SandboxSettings(), "bench")
        try:
            local = load_entries([entry], 1)
            sandboxed = await load_sandboxed(pool, [entry], 1)
            assert not local.errors and not sandboxed.errors, (local.errors, sandboxed.errors)
            tables = {name: HandlerTable(result.loaded[0].registrar.hooks, {"bench": "builtin"})
                      for name, result in (("local", local), ("sandboxed", sandboxed))}
            worker = pool.plugin("bench", root).current
            hooks, cpu = {}, {}
            for name in tables:
                for event in ("TurnStart", "TurnStop"):
                    pid = worker.pid if name == "sandboxed" and worker is not None else None
                    hooks[f"{name}_{event}_us"], cpu[f"{name}_{event}_cpu_us"] = await per_dispatch_us(tables[name], event, rounds, pid)
            code = PluginFile("bench", root, "handler.py")
            sandboxed_run = lambda *args: run_sandboxed(pool, *args)  # noqa: E731
            functions = {f"{name}_{entry_name}_us": await per_function_us(run, code, entry_name, rounds // 4)
                         for name, run in (("local", runtime.run_function), ("sandboxed", sandboxed_run))
                         for entry_name in ("handler", "reads")}
            start = await worker_start_ms(pool, root, 10)
        finally:
            await pool.close()
    return {"handlers": HANDLERS, **hooks, **cpu, **functions, "worker_start_ms": start, "load_1m": os.getloadavg()[0],
            "hook_call_added_us": (hooks["sandboxed_TurnStart_us"] - hooks["local_TurnStart_us"]) / HANDLERS,
            "function_added_us": functions["sandboxed_handler_us"] - functions["local_handler_us"]}


def main() -> None:
    result = asyncio.run(measure())
    write_result("sandbox_cost", result)
    rows = []
    for label, key, per in (("TurnStart, 5 async def handlers (sequential)", "TurnStart", HANDLERS),
                            ("TurnStop, 5 plain-function handlers (parallel)", "TurnStop", HANDLERS)):
        local, sandboxed = result[f"local_{key}_us"], result[f"sandboxed_{key}_us"]
        rows.append([label, f"{local:.1f}", f"{sandboxed:.1f}", f"{(sandboxed - local) / per:.1f} per handler",
                     f"{sandboxed / local:.1f}x"])
        local, sandboxed = result[f"local_{key}_cpu_us"], result[f"sandboxed_{key}_cpu_us"]
        rows.append([f"{key}, CPU of this process and the worker", f"{local:.1f}", f"{sandboxed:.1f}",
                     f"{(sandboxed - local) / per:.1f} per handler", f"{sandboxed / local:.1f}x"])
    for label, key in (("function runtime, handler returns a value", "handler"),
                       ("function runtime, one ctx.plugin_data.get", "reads")):
        local, sandboxed = result[f"local_{key}_us"], result[f"sandboxed_{key}_us"]
        rows.append([label, f"{local:.1f}", f"{sandboxed:.1f}", f"{sandboxed - local:.1f}", f"{sandboxed / local:.1f}x"])
    print(f"plugin sandbox cost (µs; in this process vs in the plugin's warm worker, one run; load {result['load_1m']:.1f})")
    print(table(["what", "in process", "sandboxed", "added", "ratio"], rows))
    start = result["worker_start_ms"]
    print(f"a fresh worker (zygote fork + isolation + loading the entry): p50 {start['p50']:.1f} ms, p95 {start['p95']:.1f} ms")


if __name__ == "__main__":
    main()

"""A plugin's handlers of one Dispatch travel to its sandbox worker as one round trip (services/hooks/dispatch_batches.py,
sandboxed_batches.py, plugin_side/hook_batches.py), through the real dispatcher and real worker processes: each
handler keeps its own timeout and fault accounting, the chain's order and `replace` hold, and the round trips are
counted."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from services.hooks.dispatcher import ExecutionContext, HandlerTable, dispatch
from services.hooks.observed_batches import observed_outcomes
from services.hooks.plugin_entries import PluginEntry
from services.hooks.sandboxed_entries import load_sandboxed
from shared.sandbox import SandboxPool, SandboxSettings

pytestmark = pytest.mark.asyncio(loop_scope="session")

ENTRY = '''
import asyncio, time

def register(covel):
    # PostContextAssembly: sequential, not a guard; replace may set systemPrompt and messages.
    covel.on("PostContextAssembly", first, timeout_ms=5000)
    covel.on("PostContextAssembly", raises, timeout_ms=5000)
    covel.on("PostContextAssembly", sleeps, timeout_ms=300)
    covel.on("PostContextAssembly", sees_first, timeout_ms=5000)
    covel.on("PostContextAssembly", watches, timeout_ms=5000, observe=True)
    # PostCompaction: parallel.
    covel.on("PostCompaction", quick, timeout_ms=5000)
    covel.on("PostCompaction", raises, timeout_ms=5000)
    covel.on("PostCompaction", sleeps, timeout_ms=300)
    covel.on("PostCompaction", quick, timeout_ms=5000)
    # TurnStart: a guard; the second aborts, so the third never runs.
    covel.on("TurnStart", quick, timeout_ms=5000)
    covel.on("TurnStart", aborts, timeout_ms=5000)
    covel.on("TurnStart", never, timeout_ms=5000)
    # Watchers of three events (a turn holds them for DispatchObserved); the last fails.
    covel.on("PreStep", watch_step, timeout_ms=5000, observe=True)
    covel.on("PreLLMCall", watch_call, timeout_ms=5000, observe=True)
    covel.on("PostLLMResponse", watch_fails, timeout_ms=5000, observe=True)
    # PreSchedule: the second holds the worker's loop past its time (no timer of the worker can fire).
    covel.on("PreSchedule", quick, timeout_ms=5000)
    covel.on("PreSchedule", spins, timeout_ms=300)
    covel.on("PreSchedule", quick, timeout_ms=5000)

async def first(ctx, payload):
    return {"replace": {"systemPrompt": payload["systemPrompt"] + " +first", "ignored": 1}}

async def raises(ctx, payload):
    raise ValueError("no")

async def sleeps(ctx, payload):
    await asyncio.sleep(30)

def sees_first(ctx, payload):
    # Its own signal: the handler before it timed out, not this one.
    assert not ctx.signal.aborted, ctx.signal.reason
    return {"replace": {"messages": [{"role": "system", "content": "saw: " + payload["systemPrompt"]}]}}

async def watches(ctx, payload):
    return {"replace": {"systemPrompt": "an observer changes nothing"}}

async def quick(ctx, payload):
    return None

async def aborts(ctx, payload):
    return {"action": "abort", "reason": "not now"}

async def never(ctx, payload):
    raise AssertionError("a guard's chain went on past an abort")

SEEN = []

async def watch_step(ctx, payload):
    SEEN.append(("PreStep", payload["n"]))

async def watch_call(ctx, payload):
    SEEN.append(("PreLLMCall", payload["n"]))
    return {"seen": list(SEEN)}

async def watch_fails(ctx, payload):
    raise RuntimeError("seen " + repr(SEEN))

async def spins(ctx, payload):
    end = time.monotonic() + 30
    while time.monotonic() < end:
        pass
'''
# Another plugin, before it in the table, with two watchers of PreStep (one batch of its own in that dispatch).
PAIR = '''
CALLS = []

def register(covel):
    covel.on("PreStep", one, timeout_ms=5000, observe=True)
    covel.on("PreStep", two, timeout_ms=5000, observe=True)

async def one(ctx, payload):
    CALLS.append(1)

async def two(ctx, payload):
    CALLS.append(2)
    return {"calls": list(CALLS)}
'''
EVENTS = (("PostContextAssembly", "normal"), ("PostCompaction", "normal"), ("TurnStart", "normal"), ("PreSchedule", "normal"),
          ("PreStep", "normal"), ("PreLLMCall", "normal"), ("PostLLMResponse", "normal"))
EXECUTION = ExecutionContext("s", "t", "en", ("pair", "batched"), runtime_id="r", plugin_id="batched")


@pytest.fixture
async def table(tmp_path: Path) -> AsyncIterator[tuple[HandlerTable, SandboxPool]]:
    tmp_path.chmod(0o755)
    entries = []
    for name, code, events in (("pair", PAIR, (("PreStep", "normal"),)), ("batched", ENTRY, EVENTS)):
        root = tmp_path / name
        (root / "server").mkdir(parents=True)
        (root / "server" / "index.py").write_text(code)
        for path in (root, root / "server", root / "server" / "index.py"):
            path.chmod(0o755)
        entries.append(PluginEntry(name, root, "server/index.py", events, "builtin"))
    pool = SandboxPool(SandboxSettings(), "hooks-test")
    try:
        loaded = await load_sandboxed(pool, entries, 1)
        assert not loaded.errors, loaded.errors
        registrations = [hook for plugin in loaded.loaded for hook in plugin.registrar.hooks]
        yield HandlerTable(registrations, {"pair": "builtin", "batched": "builtin"}), pool
    finally:
        await pool.close()


def round_trips(pool: SandboxPool, plugin_id: str = "batched") -> int:
    """Calls sent to the plugin's live workers so far."""
    workers = next(workers for workers in pool.plugins() if workers.plugin_id == plugin_id)
    return sum(worker.calls for worker in (workers.current, workers._draining) if worker is not None)


async def test_a_chain_keeps_the_results_around_a_handler_that_raises_and_one_that_times_out(table) -> None:
    handlers, pool = table
    before = round_trips(pool)
    result = await dispatch(handlers, "PostContextAssembly", EXECUTION, {"systemPrompt": "base", "messages": []})
    assert round_trips(pool) - before == 1, "five handlers of one plugin are one round trip"
    assert [(entry.status, entry.message) for entry in result.trace] == [
        ("ok", ""),
        ("error", "raised ValueError: no"),
        ("timeout", "did not finish within 300 ms; its worker process is replaced and stopped"),
        ("ok", ""),
        ("ok", ""),
    ]
    # The fourth saw the first's change; an observer's replace changes nothing; fields outside replace_fields drop.
    assert result.payload == {"systemPrompt": "base +first",
                               "messages": [{"role": "system", "content": "saw: base +first"}]}
    assert not result.aborted


async def test_a_parallel_batch_reports_each_handler(table) -> None:
    handlers, pool = table
    before = round_trips(pool)
    result = await dispatch(handlers, "PostCompaction", EXECUTION, {"summary": "x"})
    assert round_trips(pool) - before == 1
    assert [entry.status for entry in result.trace] == ["ok", "error", "timeout", "ok"]


async def test_a_guard_chain_stops_at_an_abort_as_the_dispatcher_does(table) -> None:
    handlers, _ = table
    result = await dispatch(handlers, "TurnStart", EXECUTION, {"playerMessage": "hi"})
    assert result.aborted and result.reason == "not now"
    assert [entry.status for entry in result.trace] == ["ok", "abort"]


async def test_a_handler_holding_the_workers_loop_is_the_one_that_timed_out_and_the_next_runs_alone(table) -> None:
    handlers, pool = table
    result = await dispatch(handlers, "PreSchedule", EXECUTION, {"triggered": []})
    assert [(entry.handler_plugin_id, entry.status) for entry in result.trace] == [
        ("batched", "ok"), ("batched", "timeout"), ("batched", "ok")]
    assert "did not finish within 300 ms" in result.trace[1].message
    assert next(workers for workers in pool.plugins() if workers.plugin_id == "batched").faults >= 1


async def test_a_plugins_watchers_of_the_held_events_are_one_round_trip_in_the_events_order(table) -> None:
    handlers, pool = table
    held = [("PreStep", EXECUTION, {"n": 1}), ("PreLLMCall", EXECUTION, {"n": 2}), ("PostLLMResponse", EXECUTION, {"n": 3})]
    before, pair_before = round_trips(pool), round_trips(pool, "pair")
    prefetched = await observed_outcomes(handlers, held)
    traces = [(await dispatch(handlers, name, execution, payload, outcomes)).trace
              for (name, execution, payload), outcomes in zip(held, prefetched, strict=True)]
    assert round_trips(pool) - before == 1, "three events' watchers of one plugin are one round trip"
    # The other plugin watches one of the events: its two watchers are that dispatch's batch, and the first plugin's
    # watcher of it, run already, does not run again.
    assert round_trips(pool, "pair") - pair_before == 1
    assert [[(entry.event, entry.handler_plugin_id, entry.status, entry.message) for entry in trace] for trace in traces] == [
        [("PreStep", "pair", "ok", ""), ("PreStep", "pair", "ok", ""), ("PreStep", "batched", "ok", "")],
        [("PreLLMCall", "batched", "ok", "")],
        [("PostLLMResponse", "batched", "error", "raised RuntimeError: seen [('PreStep', 1), ('PreLLMCall', 2)]")]]



def test_random_int_is_half_open_seeded_and_checked():
    import pytest

    from shared.plugin_sdk.seeded_random import SeededRandom

    rolls = [SeededRandom("seed").int(1, 7) for _ in range(1)] + [SeededRandom("seed").int(1, 7)]
    assert rolls[0] == rolls[1]
    die = SeededRandom("many")
    seen = {die.int(1, 7) for _ in range(600)}
    assert seen == {1, 2, 3, 4, 5, 6}
    assert SeededRandom("x").int(5, 6) == 5
    for bad in ((3, 3), (4, 1), (0, 2**48), (1.5, 3), (True, 3), (0, 2**53)):
        with pytest.raises(ValueError):
            SeededRandom("x").int(*bad)


def test_a_random_snapshot_rolls_on_as_the_original():
    """A sandbox worker rebuilds ctx.random from its seed (fresh) or its state (drawn from): same rolls either way."""
    import json

    from shared.plugin_sdk.seeded_random import SeededRandom

    for draws in (0, 3):
        original, twin = SeededRandom("snap"), SeededRandom("snap")
        for _ in range(draws):
            original.int(0, 100)
            twin.int(0, 100)
        rebuilt = SeededRandom.restore(json.loads(json.dumps(original.snapshot())))
        assert [rebuilt.int(0, 1000) for _ in range(20)] + [rebuilt.float()] == [twin.int(0, 1000) for _ in range(20)] + [twin.float()]
    assert SeededRandom("snap").snapshot().keys() == {"seed"}, "a fresh generator travels as its 32-byte seed, not 625 words"


# -- run_function: sync handlers in a worker thread, and the value a handler gives --

def _context():
    from types import MappingProxyType

    from services.scheduler.execution.plugin_data_view import PluginDataView
    from services.scheduler.function.runtime import FunctionContext
    from shared.plugin_sdk import CancellationSignal
    from shared.plugin_sdk.seeded_random import SeededRandom

    async def nothing_committed(namespace):
        return {}

    return FunctionContext(
        runtime_id="probe/r", plugin_id="probe", inputs=MappingProxyType({}), player_message="", player_actions=(), logical_turn=1,
        execution=MappingProxyType({"origin": "player"}), recursion_depth=0, random=SeededRandom("t"),
        plugin_data=PluginDataView("probe", nothing_committed), signal=CancellationSignal(), user_settings=MappingProxyType({}),
    )


def _handler(tmp_path, name, source):
    from shared.plugin_code import PluginFile

    (tmp_path / f"{name}.py").write_text(source)
    return PluginFile("probe", tmp_path, f"{name}.py")


async def test_a_slow_sync_handler_times_out_in_a_thread_without_blocking_the_loop(tmp_path):
    import asyncio
    import time

    from services.scheduler.function.runtime import run_function

    path = _handler(tmp_path, "slow_sync", "import time\n\ndef handler(ctx):\n    time.sleep(1.5)\n    ctx.emit_event('late.event')\n    return {'late': True}\n")
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            await asyncio.sleep(0.02)
            ticks += 1

    beat = asyncio.create_task(ticker())
    started = time.monotonic()
    context = _context()
    outcome = await run_function(context, path, 200)
    beat.cancel()
    assert outcome.status == "failed" and "function.timeoutMs" in outcome.reason and "200 ms" in outcome.reason
    assert time.monotonic() - started < 1.0, "the runtime failed at its limit, not when the thread finished"
    assert ticks >= 5, "the event loop kept running while the handler slept"
    assert context.signal.aborted and outcome.events == [] and outcome.writes == []


async def test_a_sync_handler_runs_in_a_thread_and_returns_its_value(tmp_path):
    import threading

    from services.scheduler.function.runtime import run_function

    path = _handler(tmp_path, "quick_sync", "import threading\n\ndef handler(ctx):\n    ctx.emit_event('done')\n"
                    "    return {'thread': threading.current_thread().name}\n")
    outcome = await run_function(_context(), path, 2000)
    assert outcome.status == "success" and outcome.output["thread"] != threading.current_thread().name
    assert [event["topic"] for event in outcome.events] == ["done"]


async def test_a_sync_handler_that_raises_fails_its_runtime(tmp_path):
    from services.scheduler.function.runtime import run_function

    path = _handler(tmp_path, "raising_sync", "def handler(ctx):\n    raise KeyError('missing')\n")
    outcome = await run_function(_context(), path, 2000)
    assert outcome.status == "failed" and outcome.reason == "handler raised KeyError: 'missing'"


async def test_null_is_a_value_and_returning_nothing_is_not(tmp_path):
    from services.scheduler.function.runtime import run_function

    cases = {
        "returns_nothing": ("def handler(ctx):\n    pass\n", {}, False, None),
        "returns_null": ("from shared.plugin_sdk.values import NULL\n\nasync def handler(ctx):\n    return NULL\n", {"value": None}, True, None),
        "returns_scalar": ("def handler(ctx):\n    return 3\n", {"value": 3}, True, 3),
        "returns_array": ("def handler(ctx):\n    return [1, None]\n", {"value": [1, None]}, True, [1, None]),
        "returns_object": ("def handler(ctx):\n    return {'a': None}\n", {"a": None}, True, {"a": None}),
        "returns_false": ("def handler(ctx):\n    return False\n", {"value": False}, True, False),
    }
    for name, (source, output, has_value, canonical) in cases.items():
        outcome = await run_function(_context(), _handler(tmp_path, name, source), 2000)
        assert (outcome.status, outcome.output, outcome.has_value, outcome.canonical_value) == ("success", output, has_value, canonical), name


def test_covel_random_seed_makes_seeded_random_repeat(monkeypatch):
    from shared.plugin_sdk.seeded_random import seeded_random

    def rolls(turn=3, runtime="probe/dice", session="s1"):
        die = seeded_random(turn, runtime, session)
        return [die.int(1, 7) for _ in range(12)]

    monkeypatch.setenv("COVEL_RANDOM_SEED", "42")
    first = rolls()
    assert rolls() == first, "the n-th number of a runtime is the same on every run"
    assert rolls(session="another session") == first, "the seed, turn and runtime decide, not the session id"
    assert rolls(runtime="probe/other") != first and rolls(turn=4) != first
    monkeypatch.setenv("COVEL_RANDOM_SEED", "43")
    assert rolls() != first
    monkeypatch.delenv("COVEL_RANDOM_SEED")
    assert rolls() != rolls(), "without a seed every run draws anew"


async def test_overrunning_sync_handlers_hold_plugin_threads_not_the_default_executor(tmp_path):
    import asyncio
    import os

    from services.scheduler.function.runtime import run_function

    path = _handler(tmp_path, "overrun", "import time\n\ndef handler(ctx):\n    time.sleep(1.0)\n")
    # More overrunning handlers than the default executor has threads (min(32, cpus + 4)).
    overrunning = min(32, (os.cpu_count() or 1) + 4) + 1
    outcomes = await asyncio.gather(*(run_function(_context(), path, 50) for _ in range(overrunning)))
    assert {outcome.status for outcome in outcomes} == {"failed"}
    # The service's own thread work (getaddrinfo, file reads) still gets a thread at once.
    assert await asyncio.wait_for(asyncio.to_thread(lambda: "free"), 0.5) == "free"

"""Function handlers in sandbox workers (services/scheduler/function/sandboxed.py): the ctx a
handler knows, its calls back to the scheduler, its value, and the end of one that overruns or crashes."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from types import MappingProxyType

import pytest

from services.scheduler.execution.plugin_data_view import PluginDataView
from services.scheduler.function.runtime import FunctionContext
from services.scheduler.function.sandboxed import run_sandboxed
from shared.plugin_code import PluginFile
from shared.plugin_sdk import CancellationSignal
from shared.plugin_sdk.seeded_random import SeededRandom
from shared.sandbox import SandboxPool, SandboxSettings

pytestmark = pytest.mark.asyncio(loop_scope="session")
# The sandbox as it ships (the suite's default keeps probe plugins' folders: tests/conftest.py).
SHIPPED = SandboxSettings(sandbox_hide_dirs=True, sandbox_drop_privileges=True, sandbox_pass_env=[])

HANDLER = '''
import os, time
from shared.plugin_sdk.values import NULL

async def handler(ctx):
    before = await ctx.plugin_data.get("scores", "ana", "none yet")
    await ctx.plugin_data.set("scores", "ana", 7)
    ctx.propose("character.upsert", {"characterId": "ana", "character": {"name": "Ana"}})
    ctx.emit_event("probe.done", {"roll": ctx.random.int(1, 7)})
    try:
        ctx.world.characters = ()
        changed = "changed"
    except TypeError:
        changed = "frozen"
    return {"before": before, "after": await ctx.plugin_data.get("scores", "ana"), "world": changed,
            "inputs": dict(ctx.inputs), "settings": dict(ctx.user_settings), "covel_env": [k for k in os.environ if k.startswith("COVEL")]}

def spin(ctx):
    while True:
        pass

def crash(ctx):
    os._exit(9)

def nothing(ctx):
    return NULL
'''


class World:
    characterSchema = None
    characters = ({"id": "ana"},)
    dimensions = MappingProxyType({})
    seats = ()
    worldRecord = None


def context(seed: str = "s") -> FunctionContext:
    async def committed(namespace):
        return {("scores", "ana"): 3}

    return FunctionContext(
        runtime_id="probe/r", plugin_id="probe", inputs=MappingProxyType({"mood": {"level": 2}}), player_message="hi",
        player_actions=(), logical_turn=1, execution=MappingProxyType({"origin": "player"}), recursion_depth=0,
        random=SeededRandom(seed), plugin_data=PluginDataView("probe", committed), signal=CancellationSignal(),
        user_settings=MappingProxyType({"tone": "dry"}), world=World(),
    )


@pytest.fixture
async def pool():
    sandbox = SandboxPool(SHIPPED, "test")
    yield sandbox
    await sandbox.close()


def handler_file(tmp_path: Path) -> Path:
    # The plugin folder must be readable by the sandbox uid (its parents need not be).
    root = tmp_path / "probe"
    root.mkdir(mode=0o755)
    (root / "handler.py").write_text(HANDLER)
    return root


async def test_a_sandboxed_handler_reads_and_writes_through_the_scheduler(pool, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("COVEL_STORE_DATABASE_URL", "postgresql://user:secret@db/covel")
    root = handler_file(tmp_path)
    ctx = context()
    expected_roll = SeededRandom("s").int(1, 7)
    outcome = await run_sandboxed(pool, ctx, PluginFile("probe", root, "handler.py"), 5000)
    assert outcome.status == "success", outcome.reason
    assert outcome.canonical_value == {"before": 3, "after": 7, "world": "frozen", "inputs": {"mood": {"level": 2}},
                                       "settings": {"tone": "dry"}, "covel_env": []}
    # Writes in the order the handler made them: its plugin data, then its proposal.
    assert [write["type"] for write in outcome.writes] == ["plugin.data", "character.upsert"]
    assert outcome.events == [{"topic": "probe.done", "payload": {"roll": expected_roll}}]
    assert outcome.read_from == set()


async def test_null_and_errors_read_as_in_process(pool, tmp_path: Path) -> None:
    root = handler_file(tmp_path)
    done = await run_sandboxed(pool, context(), PluginFile("probe", root, "handler.py"), 5000, entry="nothing")
    assert done.status == "success" and done.has_value and done.canonical_value is None and done.output == {"value": None}
    missing = await run_sandboxed(pool, context(), PluginFile("probe", root, "handler.py"), 5000, entry="guard")
    assert missing.status == "failed" and missing.reason == "handler raised ImportError: handler.py defines no guard(…) function"


async def test_a_spinning_handler_fails_at_its_timeout_and_its_worker_is_killed(pool, tmp_path: Path) -> None:
    root = handler_file(tmp_path)
    workers = pool.plugin("probe", root)
    first = await workers.worker()
    started = time.monotonic()
    outcome = await run_sandboxed(pool, context(), PluginFile("probe", root, "handler.py"), 300, entry="spin")
    assert outcome.status == "failed" and outcome.reason == "function.timeoutMs: the handler did not finish within 300 ms"
    assert time.monotonic() - started < 1.5
    await asyncio.wait_for(first.process.wait(), 10)
    assert workers.faults == 1
    again = await run_sandboxed(pool, context(), PluginFile("probe", root, "handler.py"), 5000, entry="nothing")
    assert again.status == "success"


async def test_a_crashing_handler_fails_its_runtime_and_the_next_run_gets_a_fresh_worker(pool, tmp_path: Path) -> None:
    root = handler_file(tmp_path)
    crashed = await run_sandboxed(pool, context(), PluginFile("probe", root, "handler.py"), 5000, entry="crash")
    assert crashed.status == "failed" and "exited (exit code 9)" in crashed.reason
    again = await run_sandboxed(pool, context(), PluginFile("probe", root, "handler.py"), 5000, entry="nothing")
    assert again.status == "success"
    assert pool.faults["probe"] == 1

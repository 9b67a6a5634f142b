"""provide_lifespan (services/hooks/plugin_side/lifespans.py): entered in pluggy's order after a plugin loads, left in
reverse when its code is unloaded (a Reload's old generation, the service stopping); a lifespan whose enter
raises or hangs is logged, reported to on_error and skipped; exits are bounded."""

from __future__ import annotations

import asyncio
import json
import time
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import pytest

from covel.registry.v1 import registry_pb2
from services.hooks.catalogue_sync import CatalogueSync
from services.hooks.plugin_side.hookspec_adapter import HookspecAdapter
from services.hooks.plugin_side.lifespans import Lifespans
from services.registry.package_loader import load_package
from services.registry.proto_mapping import package_to_proto
from shared.plugin_sdk.hookspecs import hookimpl
from shared.settings import REPO_ROOT

pytestmark = pytest.mark.asyncio(loop_scope="session")
FIXTURES = REPO_ROOT / "tests" / "fixtures" / "plugins"


class Journal:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.errors: list[tuple[str, str]] = []

    @hookimpl
    def on_error(self, stage, error, message):
        self.errors.append((stage, str(error)))


def forms(journal: Journal) -> list[object]:
    """One lifespan of each form; pluggy calls the last registered first."""

    class AsyncManager:
        @hookimpl
        def provide_lifespan(self):
            @asynccontextmanager
            async def held():
                journal.lines.append("enter async-cm")
                yield
                journal.lines.append("exit async-cm")
            return held()

    class SyncManager:
        @hookimpl
        def provide_lifespan(self):
            @contextmanager
            def held():
                journal.lines.append("enter sync-cm")
                yield
                journal.lines.append("exit sync-cm")
            return held()

    class AsyncGenerator:
        @hookimpl
        async def provide_lifespan(self):
            journal.lines.append("enter async-gen")
            yield
            journal.lines.append("exit async-gen")

    class SyncGenerator:
        @hookimpl
        def provide_lifespan(self):
            journal.lines.append("enter sync-gen")
            yield
            journal.lines.append("exit sync-gen")

    return [SyncGenerator(), AsyncGenerator(), SyncManager(), AsyncManager()]


async def test_every_form_is_entered_in_hook_order_and_left_in_reverse() -> None:
    journal = Journal()
    adapter = HookspecAdapter("p", [journal, *forms(journal)])
    assert await adapter.lifespans.enter() == ["p#4:AsyncManager", "p#3:SyncManager", "p#2:AsyncGenerator", "p#1:SyncGenerator"]
    assert journal.lines == ["enter async-cm", "enter sync-cm", "enter async-gen", "enter sync-gen"]
    # Entered once: a second enter changes nothing.
    await adapter.lifespans.enter()
    assert len(journal.lines) == 4
    await adapter.lifespans.leave()
    assert journal.lines[4:] == ["exit sync-gen", "exit async-gen", "exit sync-cm", "exit async-cm"]
    assert journal.errors == []


async def test_a_raising_hanging_or_wrong_lifespan_is_skipped_and_reported() -> None:
    journal = Journal()

    class Raises:
        @hookimpl
        def provide_lifespan(self):
            raise RuntimeError("no oil")

    class RaisesOnEnter:
        @hookimpl
        async def provide_lifespan(self):
            raise RuntimeError("door stuck")
            yield

    class Hangs:
        @hookimpl
        async def provide_lifespan(self):
            await asyncio.sleep(60)
            yield

    class Wrong:
        @hookimpl
        def provide_lifespan(self):
            return 42

    adapter = HookspecAdapter("p", [journal, *forms(journal)[:1], Raises(), RaisesOnEnter(), Hangs(), Wrong()])
    started = time.monotonic()
    assert await adapter.lifespans.enter(timeout_s=0.3) == ["p#1:SyncGenerator"]
    assert time.monotonic() - started < 2
    stages = [stage for stage, _ in journal.errors]
    assert stages == ["provide_lifespan"] * 3, journal.errors
    assert "no oil" in journal.errors[2][1] and "door stuck" in journal.errors[1][1] and "within 0.3 s" in journal.errors[0][1]
    await adapter.lifespans.leave()
    assert journal.lines == ["enter sync-gen", "exit sync-gen"]


async def test_exits_are_bounded_and_one_that_raises_does_not_stop_the_others() -> None:
    journal = Journal()

    class SlowExit:
        @hookimpl
        async def provide_lifespan(self):
            yield
            await asyncio.sleep(60)

    class RaisingExit:
        @hookimpl
        def provide_lifespan(self):
            yield
            raise RuntimeError("smoke")

    # Entered SlowExit, RaisingExit, SyncGenerator; left SyncGenerator, RaisingExit (raises), SlowExit (abandoned).
    adapter = HookspecAdapter("p", [journal, *forms(journal)[:1], RaisingExit(), SlowExit()])
    await adapter.lifespans.enter()
    started = time.monotonic()
    await adapter.lifespans.leave(timeout_s=0.3)
    assert 0.25 < time.monotonic() - started < 2
    assert journal.lines == ["enter sync-gen", "exit sync-gen"]
    assert [stage for stage, _ in journal.errors] == ["provide_lifespan"] and "smoke" in journal.errors[0][1]


async def test_a_context_manager_is_left_by_the_task_that_entered_it() -> None:
    """A task group (anyio's cancel scopes too) must be left by the task that entered it."""
    seen: list[object] = []

    class Group:
        @hookimpl
        def provide_lifespan(self):
            @asynccontextmanager
            async def held():
                seen.append(asyncio.current_task())
                async with asyncio.TaskGroup():
                    yield
                seen.append(asyncio.current_task())
            return held()

    lifespans = HookspecAdapter("p", [Group()]).lifespans
    await lifespans.enter()
    await lifespans.leave()
    assert len(seen) == 2 and seen[0] is seen[1]


async def test_a_plugin_without_lifespans_needs_no_task() -> None:
    lifespans: Lifespans = HookspecAdapter("p", [Journal()]).lifespans
    assert not lifespans.implemented and await lifespans.enter() == []
    await lifespans.leave()


class Registry:
    """ListPlugins of a registry that serves lifespan-probe, at a generation the test sets."""

    def __init__(self) -> None:
        self.generation = 1

    async def ListPlugins(self, request):
        package = package_to_proto(load_package(FIXTURES / "lifespan-probe", source="builtin"))
        package.state = registry_pb2.PLUGIN_STATE_LOADED
        return registry_pb2.ListPluginsResponse(generation=self.generation, plugins=[package])


def records(data_dir: Path) -> list[dict]:
    path = data_dir / "lifespan-probe.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


async def test_a_reload_leaves_the_old_generations_lifespans_and_stopping_leaves_the_last(tmp_path, monkeypatch) -> None:
    """In the hooks service's process (no sandbox): lifespan-probe through CatalogueSync."""
    monkeypatch.setenv("COVEL_DATA_DIR", str(tmp_path))
    registry = Registry()
    sync = CatalogueSync(registry)  # type: ignore[arg-type]
    await sync.reload()
    first = records(tmp_path)
    assert [(r["event"], r.get("lifespan") or r.get("stage")) for r in first] == [
        ("enter", "lamp"), ("on_error", "provide_lifespan"), ("enter", "hearth")]
    assert "the cellar door is stuck" in first[1]["error"]
    registry.generation = 2
    await sync.reload()
    old, second = first[0]["load"], records(tmp_path)[3:]
    new = second[0]["load"]
    # The new generation entered (its cellar failing again), then the old one left: hearth, then lamp.
    assert [(r["event"], r.get("lifespan"), r["load"]) for r in second if r["event"] != "on_error"] == [
        ("enter", "lamp", new), ("enter", "hearth", new), ("exit", "hearth", old), ("exit", "lamp", old)]
    await sync.leave_lifespans()
    last = records(tmp_path)[3 + len(second):]
    assert [(r["event"], r["lifespan"], r["load"]) for r in last] == [("exit", "hearth", new), ("exit", "lamp", new)]


async def test_in_a_sandbox_worker_a_fault_runs_no_exits_and_a_forgotten_plugin_leaves_them(tmp_path, monkeypatch) -> None:
    """A worker killed (a fault) leaves nothing, and its replacement enters them again before it serves; a plugin
    gone from the catalogue has its worker leave them (its teardown) before it goes."""
    from services.hooks.catalogue_sync import _entries
    from services.hooks.sandboxed_entries import load_sandboxed
    from services.hooks.worker_lifespans import enter_all
    from shared.sandbox import SandboxPool, SandboxSettings

    monkeypatch.setenv("COVEL_DATA_DIR", str(tmp_path))
    settings = SandboxSettings(sandbox_hide_dirs=False, sandbox_drop_privileges=False, sandbox_pass_env=["COVEL_DATA_DIR"])
    pool = SandboxPool(settings, "test", data_dir=tmp_path)
    try:
        result = await load_sandboxed(pool, _entries(await Registry().ListPlugins(None)), generation=1)
        await enter_all(result.loaded)
        [entered] = [r for r in records(tmp_path) if r["event"] == "enter" and r["lifespan"] == "hearth"]
        [workers] = pool.plugins()
        assert workers.current is not None
        workers.current.kill("a test's fault")
        await workers.call("hookspec", {"gen": 1, "method": "plugin_tools", "tools": []})
        again = [r for r in records(tmp_path) if r["event"] == "enter" and r["lifespan"] == "hearth"]
        assert len(again) == 2 and not [r for r in records(tmp_path) if r["event"] == "exit"]
        await load_sandboxed(pool, [], generation=2)
        deadline = time.monotonic() + 10
        while len(left := [r for r in records(tmp_path) if r["event"] == "exit"]) < 2:
            assert time.monotonic() < deadline, records(tmp_path)
            await asyncio.sleep(0.05)
        assert [(r["lifespan"], r["load"]) for r in left] == [("hearth", again[1]["load"]), ("lamp", again[1]["load"])]
        assert entered["load"] != again[1]["load"]
    finally:
        await pool.close()

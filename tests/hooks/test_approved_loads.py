"""A community plugin's entry module is not imported at a catalogue load: only once a session approved it
(CatalogueSync.load_approved), once, with the declaration cross-check of any load. Builtins load as before."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from covel.registry.v1 import registry_pb2
from services.hooks.catalogue_sync import CatalogueSync
from services.registry.package_loader import load_package
from services.registry.proto_mapping import package_to_proto
from shared.settings import REPO_ROOT

PROBE = REPO_ROOT / "tests" / "fixtures" / "approval-load" / "load-probe"
BUILTIN = REPO_ROOT / "tests" / "fixtures" / "plugins" / "hook-probe"


class Registry:
    """ListPlugins serving the load probe (community) and hook-probe (builtin)."""

    def __init__(self, probe: Path) -> None:
        self.generation = 1
        self.probe = probe

    async def ListPlugins(self, request: registry_pb2.ListPluginsRequest) -> registry_pb2.ListPluginsResponse:
        packages = [package_to_proto(load_package(self.probe, source="community")),
                    package_to_proto(load_package(BUILTIN, source="builtin"))]
        for package in packages:
            package.state = registry_pb2.PLUGIN_STATE_LOADED
        return registry_pb2.ListPluginsResponse(generation=self.generation, plugins=packages)


def loads(data_dir: Path) -> int:
    path = data_dir / "load-probe.loads"
    return len(path.read_text().splitlines()) if path.exists() else 0


def subscribers(sync: CatalogueSync) -> set[str]:
    return {plugin for plugins in sync.current.table.subscribers().values() for plugin in plugins}


@pytest.fixture
def probe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("COVEL_DATA_DIR", str(tmp_path))
    copy = tmp_path / "plugins" / "load-probe"
    shutil.copytree(PROBE, copy)
    return copy


async def test_a_community_entry_loads_only_once_a_session_approved_it(probe: Path, tmp_path: Path) -> None:
    registry = Registry(probe)
    sync = CatalogueSync(registry)  # type: ignore[arg-type]
    await sync.reload()
    loaded = [plugin.entry.plugin_id for plugin in sync.current.load_result.loaded]
    assert "hook-probe" in loaded and "load-probe" not in loaded
    assert loads(tmp_path) == 0 and "load-probe" not in subscribers(sync)
    assert sync.awaiting(["load-probe", "hook-probe", "nobody"]) == ["load-probe"]
    # Approving something else, or nothing, loads nothing.
    assert await sync.load_approved(["hook-probe", "nobody"]) == []
    assert loads(tmp_path) == 0
    assert await sync.load_approved(["load-probe"]) == ["load-probe"]
    assert loads(tmp_path) == 1 and "load-probe" in subscribers(sync)
    assert sync.current.generation == 1
    # A later session approving it reuses the loaded plugin.
    assert await sync.load_approved(["load-probe"]) == []
    assert loads(tmp_path) == 1
    # A new generation loads it with the rest: some session approved it.
    registry.generation = 2
    await sync.reload()
    assert loads(tmp_path) == 2 and "load-probe" in subscribers(sync)
    await sync.leave_lifespans()


async def test_the_cross_check_runs_at_the_approved_load_and_fails_the_plugin(probe: Path, tmp_path: Path) -> None:
    manifest = probe / "PLUGIN.md"
    manifest.write_text(manifest.read_text().replace("hooks: [TurnStart]", "hooks: [TurnStart]\n  tools: [shout]"))
    sync = CatalogueSync(Registry(probe))  # type: ignore[arg-type]
    await sync.reload()
    assert loads(tmp_path) == 0 and "load-probe" not in sync.current.load_result.errors
    assert await sync.load_approved(["load-probe"]) == []
    assert loads(tmp_path) == 1
    error = sync.current.load_result.errors["load-probe"]
    assert "shout" in error and "load-probe" not in subscribers(sync)
    # Failed once: not tried again for the next session that approves it.
    assert await sync.load_approved(["load-probe"]) == []
    assert loads(tmp_path) == 1


async def test_a_call_naming_a_plugin_being_loaded_waits_for_its_load(probe: Path, tmp_path: Path) -> None:
    """Two calls naming the same approved plugin at once (a turn's runtimes on one TurnHooks stream): the second
    finds the first loading it and waits, so both see its handlers (before, it went on with the old table)."""
    sync = CatalogueSync(Registry(probe))  # type: ignore[arg-type]
    await sync.reload()
    first = asyncio.create_task(sync.load_approved(["load-probe"]))
    await asyncio.sleep(0)  # the first has taken the plugin off the waiting list and is loading it
    assert sync.awaiting(["load-probe"]) == []
    assert await sync.load_approved(["load-probe"]) == []
    assert "load-probe" in subscribers(sync), "the second call returned before the load it waited for"
    assert await first == ["load-probe"] and loads(tmp_path) == 1
    await sync.leave_lifespans()

"""Packs and the plugin plan (services/registry/packs.py, plugin_plan.py): what a pack file holds and how a
broken one is reported, and the plan of a session in a world: the pack's requests then the world's plus,
the pack's recommendations and exclusions, what is missing, and the resolved set."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from services.registry.catalogue import scan
from services.registry.packs import builtin_packs, load_packs
from services.registry.plugin_plan import UnknownPack, plugin_plan
from services.registry.world_loader import load_world
from shared.settings import REPO_ROOT


@pytest.fixture(scope="module")
def packages():
    return scan([REPO_ROOT / "plugins"])


def world(tmp_path: Path, policy: str, packages, packs=None):
    (tmp_path / "w").mkdir(exist_ok=True)
    (tmp_path / "w" / "world.yaml").write_text(f"name: W\npluginPolicy: {policy}\n", encoding="utf-8")
    return load_world(tmp_path / "w", packages, packs)


def test_the_builtin_packs_load_with_their_translations() -> None:
    packs = builtin_packs()
    assert list(packs.by_id) == ["story", "tabletop", "quiet"] and packs.diagnostics == []
    assert packs.get("tabletop").texts("zh-CN")[0] == "桌面跑团" and packs.get("tabletop").texts("fr")[0] == "Tabletop"


def test_a_broken_pack_file_is_left_out_with_diagnostics(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text("packs:\n  - {id: duel, name: Duel, requested: [narrator], defaultViewMode: 'plugin:x:y'}\n", encoding="utf-8")
    bad.write_text(textwrap.dedent("""\
        packs:
          - {id: Bad Id, name: X}
          - {id: duel, name: Again}
          - {id: odd, name: Odd, defaultViewMode: cinema}
        extra: 1
        """), encoding="utf-8")
    packs = load_packs([good, bad, tmp_path / "none.yaml"])
    assert list(packs.by_id) == ["duel"] and packs.get("duel").decl.defaultViewMode == "plugin:x:y"
    codes = sorted((d.code, d.file, d.field_path) for d in packs.diagnostics)
    assert ("duplicate-pack", "bad.yaml", "packs.duel") in codes and ("unknown-key", "bad.yaml", "extra") in codes
    assert any(code == "pack-file-missing" for code, _, _ in codes)
    assert {field for code, _, field in codes if code not in ("duplicate-pack", "unknown-key", "pack-file-missing")} >= {
        "packs[0].id", "packs[2].defaultViewMode"}


def test_the_plan_is_the_packs_requests_then_the_worlds_plus(tmp_path: Path, packages) -> None:
    loaded = world(tmp_path, "{preset: tabletop, plus: [affinity, not-installed], requires: [action-check@1]}", packages)
    assert loaded.diagnostics == [] or all(not d.is_error for d in loaded.diagnostics)
    plan = plugin_plan(loaded, builtin_packs(), packages)
    assert plan.pack.id == "tabletop"
    assert plan.pack_requested == ["narrator", "dice-check", "inventory", "world-time", "memory", "history-compaction"]
    assert plan.world_plus == ["affinity"] and plan.default_plugin_ids == [*plan.pack_requested, "affinity"]
    assert plan.recommended == ["guide"]  # affinity is already requested
    assert [(m.plugin_id, m.source) for m in plan.missing] == [("not-installed", "world")]
    assert plan.required_contracts == ["action-check@1"]
    assert set(plan.default_plugin_ids) <= set(plan.resolution.active)


def test_switching_packs_replaces_the_packs_requests_and_the_worlds_plus_stays(tmp_path: Path, packages) -> None:
    loaded = world(tmp_path, "{preset: tabletop, plus: [guide]}", packages)
    plan = plugin_plan(loaded, builtin_packs(), packages, pack_id="quiet")
    assert plan.pack.id == "quiet" and plan.default_plugin_ids == ["narrator", "guide"]
    # The pack excludes guide and the world asks for it: the exclusion wins (issue 40, 6); the plus stays a request.
    assert "guide" in plan.excluded and {"affinity", "world-time", "memory"} <= set(plan.excluded)
    assert "world-time" not in plan.resolution.active and "guide" not in plan.resolution.active
    with pytest.raises(UnknownPack):
        plugin_plan(loaded, builtin_packs(), packages, pack_id="nope")


def test_a_world_naming_no_pack_of_the_kernel_is_warned(tmp_path: Path, packages) -> None:
    loaded = world(tmp_path, "{preset: arena, plus: [guide]}", packages)
    assert [(d.code, d.field_path) for d in loaded.diagnostics] == [("world-pack-missing", "pluginPolicy.preset")]
    plan = plugin_plan(loaded, builtin_packs(), packages)
    assert plan.pack is None and plan.default_plugin_ids == ["guide"]


def test_a_packs_exclusion_lists_only_installed_plugins(tmp_path: Path, packages) -> None:
    pack_file = tmp_path / "packs.yaml"
    pack_file.write_text("packs:\n  - {id: lean, name: Lean, requested: [narrator], excluded: [guide, never-installed]}\n", encoding="utf-8")
    packs = load_packs([pack_file])
    loaded = world(tmp_path, "{preset: lean}", packages, packs)
    plan = plugin_plan(loaded, packs, packages)
    assert plan.excluded == ["guide"] and "guide" not in plan.resolution.active


def test_a_set_changed_by_hand_replaces_the_packs_and_keeps_the_pack_it_came_from(tmp_path: Path, packages) -> None:
    loaded = world(tmp_path, "{preset: tabletop, plus: [guide]}", packages)
    plan = plugin_plan(loaded, builtin_packs(), packages, by_hand=(["guide", "never-installed"], ["narrator"]))
    assert plan.pack.id == "tabletop", "the pack the set came from"
    assert plan.default_plugin_ids == ["guide"] and plan.excluded == ["narrator"]
    assert [(m.plugin_id, m.source) for m in plan.missing] == [("never-installed", "player")]
    assert "narrator" not in plan.resolution.active and "guide" in plan.resolution.active
    assert not set(plan.recommended) & {"guide", "narrator"}
    minimal = plugin_plan(loaded, builtin_packs(), packages, by_hand=([], []))
    assert minimal.default_plugin_ids == [] and minimal.excluded == [] and "narrator" in minimal.resolution.active, "core plugins stay on"

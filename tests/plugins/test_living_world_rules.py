"""living-world-rules in process: its prompt segment (a pure projection of the world's rules and what everyone
knows, in English and Chinese), its provider through the hooks service's entry loader, its right panel drawn
from the fixture world's records, and the world checks a rule in the wrong shape gets. No services
(tests/e2e/test_builtin_living_world_rules.py plays it)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml

from services.registry.loaded_world import WorldState
from services.registry.package_loader import load_package
from services.registry.world_loader import load_world
from shared.plugin_code import PluginFile
from shared.plugin_code.loader import load_module
from shared.settings import REPO_ROOT
from shared.ui_panels import render_text
from tests.plugins.test_builtin_plugins import hook_ctx, hooks_of

PLUGIN = REPO_ROOT / "plugins" / "living-world-rules"
WORLD = REPO_ROOT / "tests" / "fixtures" / "living-worlds" / "bellwater"
segment = load_module(PluginFile("living-world-rules", PLUGIN, "lib/segment.py"))


def world_records(name: str, locale: str = "") -> dict:
    """The records a session imports from the fixture world's data file (keyed by id), the translation merged in."""
    base = yaml.safe_load((WORLD / "data" / f"{name}.yaml").read_text(encoding="utf-8"))
    records = {record["id"]: dict(record) for record in base}
    if locale:
        for record in yaml.safe_load((WORLD / "data" / f"{name}.{locale}.yaml").read_text(encoding="utf-8")):
            records[record["id"]].update(record)
    return records


DATA = {"rules": world_records("rules"), "info": world_records("world-info")}


def test_the_segment_lists_the_rules_then_what_everyone_knows() -> None:
    text = segment.segment_text(DATA, "en")
    assert text.splitlines() == [
        segment.HEADINGS["en"][0],
        "- The lighthouse must never go dark two nights running.",
        "- No one sails after the evening bell; a boat that leaves after it is never seen again.",
        "",
        "What everyone in this world knows:",
        "- The ferry: Ysolde's ferry comes every seventh day with the mail.",
    ]
    chinese = segment.segment_text({"rules": world_records("rules", "zh"), "info": world_records("world-info", "zh")}, "zh")
    assert chinese.startswith("这个世界的规则。") and "- 灯塔绝不能连续两夜熄灭。" in chinese
    assert "- 渡船：伊索尔德的渡船每七天来一次，带来信件。" in chinese


def test_the_segment_keeps_only_flat_current_records_and_is_empty_without_any() -> None:
    wrapped = {"rules": {"a": {"rule": {"id": "a", "content": "Wrapped."}}, "b": {"schemaVersion": 2, "id": "b", "content": "Later version."},
                         "c": {"schemaVersion": 1, "id": "c", "content": "  Kept,   squeezed.  "}}}
    assert segment.segment_text(wrapped) == f"{segment.HEADINGS['en'][0]}\n- Kept, squeezed."
    assert segment.segment_text({}) == "" and segment.segment_text(None) == ""
    many = {"rules": {f"r{i:02}": {"schemaVersion": 1, "id": f"r{i:02}", "content": "x" * 900} for i in range(30)}}
    text = segment.segment_text(many)
    assert len(text) <= segment.MAX_CHARS and text.endswith("…")


def test_the_provider_answers_a_system_segment_and_none_for_a_world_without_rules() -> None:
    registrar = hooks_of("living-world-rules")
    [(point, extension_id, provider)] = [(e.point, e.id, e.provider) for e in registrar.extensions]
    assert (point, extension_id) == ("prompt.segment@1", "rules")
    answer = provider(hook_ctx("PostContextAssembly", "living-world-rules"), {"runtimeId": "narrator", "visibility": "story", "data": DATA})
    assert answer["id"] == "rules" and answer["position"] == "system" and "two nights running" in answer["content"]
    chinese = provider(hook_ctx("PostContextAssembly", "living-world-rules", locale="zh"), {"data": DATA})
    assert chinese["content"].startswith("这个世界的规则。")
    assert provider(hook_ctx("PostContextAssembly", "living-world-rules"), {"data": {}}) is None


def test_the_panel_draws_the_rules_and_what_everyone_knows() -> None:
    spec = json.loads((PLUGIN / "ui" / "right.json").read_text())
    lines = render_text(spec, {"data": DATA, "world": {}, "session": {}})
    assert lines[0] == "World rules" and "The lighthouse must never go dark two nights running." in "\n".join(lines)
    assert any("The ferry" in line and "seventh day" in line for line in lines)
    assert "This world sets no rules of its own." in "\n".join(render_text(spec, {"data": {}, "world": {}, "session": {}}))


def test_the_world_reads_its_rules_by_convention_and_a_rule_in_the_wrong_shape_fails_it(tmp_path: Path) -> None:
    packages = [load_package(PLUGIN, source="builtin"), load_package(REPO_ROOT / "plugins" / "story-events", source="builtin")]
    loaded = load_world(WORLD, packages)
    assert loaded.state is WorldState.LOADED, [str(d) for d in loaded.diagnostics]
    contracts = {source.contract: source.files for source in loaded.data_sources}
    assert contracts["living-world-rules@1"] == ("data/rules.yaml",) and contracts["world-info@1"] == ("data/world-info.yaml",)
    broken = Path(shutil.copytree(WORLD, tmp_path / "bellwater"))
    (broken / "data" / "rules.yaml").write_text("- {id: wrapped, rule: {content: The bell is rung at dusk.}}\n- {schemaVersion: 1, id: empty, content: ''}\n")
    (broken / "data" / "rules.zh.yaml").unlink()
    failed = load_world(broken, packages)
    assert failed.state is WorldState.FAILED
    invalid = [d for d in failed.diagnostics if d.is_error and d.code == "data-record-invalid"]
    assert {(d.file, d.field_path) for d in invalid} >= {("data/rules.yaml", "[0]"), ("data/rules.yaml", "[1].content")}, [str(d) for d in invalid]
    assert any("schemaVersion" in d.message for d in invalid if d.field_path == "[0]"), "a {rule: ...} wrapper is not a rule"


def test_a_world_that_requires_the_contracts_gets_the_plugins() -> None:
    from services.registry.session_resolution import resolve_session_plugins

    packages = [load_package(REPO_ROOT / "plugins" / name, source="builtin") for name in ("narrator", "living-world-rules", "story-events")]
    resolution = resolve_session_plugins(packages, [], [], required_contracts=["living-world-rules@1", "world-info@1"])
    assert resolution.auto_added == ["living-world-rules"] and resolution.unmet == []


def test_a_world_that_names_a_rules_file_it_does_not_have_fails_clearly(tmp_path: Path) -> None:
    packages = [load_package(PLUGIN, source="builtin"), load_package(REPO_ROOT / "plugins" / "story-events", source="builtin")]
    broken = Path(shutil.copytree(WORLD, tmp_path / "bellwater"))
    world_yaml = broken / "world.yaml"
    world_yaml.write_text(world_yaml.read_text().replace("data:\n", "data:\n  - to: contract:living-world-rules@1\n    source: {path: data/laws.yaml}\n", 1))
    failed = load_world(broken, packages)
    assert failed.state is WorldState.FAILED
    errors = [d for d in failed.diagnostics if d.is_error]
    assert any("laws.yaml" in d.message and d.field_path.startswith("data[0]") for d in errors), [str(d) for d in errors]

"""What a session in a world imports from the world's data (services/registry/world_import.py): each
source to every running plugin namespace that accepts its contract, hidden sources to `_hidden.<ns>`,
data translations merged in the session's language, sources a plugin's `authoring` finds by
convention, and the dataset rules checked when the world is scanned."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from services.registry.loaded_package import LoadedPackage
from services.registry.loaded_world import WorldState
from services.registry.package_loader import load_package
from services.registry.world_import import import_records
from services.registry.world_loader import load_world
from shared.settings import REPO_ROOT
from tests.registry.test_world_loader import TIDEFALL, WORLD_PLUGINS, edit, problems, write


@pytest.fixture(scope="module")
def packages() -> list[LoadedPackage]:
    return [load_package(WORLD_PLUGINS / "lore-keeper", source="builtin"), load_package(REPO_ROOT / "plugins" / "dice-check", source="builtin")]


def imported(world, packages, plugins=("lore-keeper",), locale=""):
    return {(r.plugin_id, r.namespace, r.key): r.value for r in import_records(world, packages, set(plugins), locale)}


def test_each_source_reaches_the_namespaces_that_accept_its_contract(packages) -> None:
    world = load_world(TIDEFALL, packages)
    assert world.state is WorldState.LOADED, [str(d) for d in world.diagnostics]
    records = imported(world, packages)
    assert sorted(records) == [
        ("lore-keeper", "_hidden.rules", "calm"), ("lore-keeper", "_hidden.rules", "flood"),  # hidden, keyed by `name`
        ("lore-keeper", "blueprints", "ossa"),  # a characterField, keyed by the character's id
        ("lore-keeper", "facts", "bells"), ("lore-keeper", "facts", "ebb"),
        ("lore-keeper", "lore", "founding"),  # a text document, keyed by its file's stem
    ]
    assert records[("lore-keeper", "blueprints", "ossa")] == {"voice": "whispering"}
    assert records[("lore-keeper", "lore", "founding")]["text"].startswith("Tidefall was founded")
    # A plugin that does not run in the session receives nothing; the kernel never names one.
    assert imported(world, packages, plugins=("dice-check",)) == {}


def test_a_data_translation_is_merged_in_the_sessions_language(packages) -> None:
    world = load_world(TIDEFALL, packages)
    english, chinese = imported(world, packages), imported(world, packages, locale="zh")
    assert english[("lore-keeper", "facts", "bells")]["text"] == "The bells ring when the tide turns."
    assert chinese[("lore-keeper", "facts", "bells")] == {"id": "bells", "text": "潮水转向时，钟声响起。",
                                                        "attributes": [{"id": "courage", "base": 1, "max": 3}]}
    # localeArrayKeys: the gulls sign is matched by its label; the mud sign keeps its English text.
    assert chinese[("lore-keeper", "facts", "ebb")]["signs"] == [{"label": "mud", "text": "The mud shines."},
                                                              {"label": "gulls", "text": "海鸥在广场上踱步。"}]
    assert chinese[("lore-keeper", "facts", "ebb")]["text"] == "At low water the old streets show."
    # The translation file is no source of its own.
    assert world.data_sources[0].files == ("data/facts.yaml",)


def test_a_translation_only_translates(tmp_path: Path, packages) -> None:
    root = Path(shutil.copytree(TIDEFALL, tmp_path / "tidefall"))
    write(root, "data/facts.zh.yaml", """\
        - id: bells
          colour: 金色
        - id: storm
          text: 风暴。
        - id: ebb
          signs: [{text: 没有标签。}, {label: crabs, text: 螃蟹。}]
        """)
    world = load_world(root, packages)
    assert problems(world) == {
        ("data-translation-unknown", "data/facts.zh.yaml", "[0].colour"),
        ("data-translation-unknown", "data/facts.zh.yaml", "[1]"),
        ("data-translation-unmatched", "data/facts.zh.yaml", "[2].signs[0]"),
        ("data-translation-unmatched", "data/facts.zh.yaml", "[2].signs[1]"),
    }


def test_a_plugins_authoring_source_imports_by_convention(tmp_path: Path, packages) -> None:
    plugin = Path(shutil.copytree(WORLD_PLUGINS / "lore-keeper", tmp_path / "plugins" / "lore-keeper"))
    edit(plugin, "PLUGIN.md", "      authoring:\n        title: Facts", "      authoring:\n        source: {path: facts/*.yaml}\n        title: Facts")
    edit(plugin, "PLUGIN.md", "      accepts: [example.blueprints@1]", "      accepts: [example.blueprints@1]\n      authoring: {characterField: sketch}")
    conventional = [load_package(plugin, source="builtin"), packages[1]]
    root = tmp_path / "plain"
    write(root, "world.yaml", "name: Plain\ncharacters: [{id: mira, name: Mira, sketch: {voice: low}}]\n")
    write(root, "facts/b.yaml", "- {id: second, text: Two.}\n")
    write(root, "facts/a.yaml", "- {id: first, text: One.}\n")
    world = load_world(root, conventional)
    assert world.state is WorldState.LOADED, [str(d) for d in world.diagnostics]
    assert world.data_sources[0].where == "plugin lore-keeper contributes.data.facts.authoring"
    assert sorted(imported(world, conventional)) == [
        ("lore-keeper", "blueprints", "mira"), ("lore-keeper", "facts", "first"), ("lore-keeper", "facts", "second")]
    # A `data:` entry for the contract wins over the convention; a world without the files imports nothing.
    write(root, "world.yaml", "name: Plain\ndata: [{to: 'contract:example.facts@1', source: {path: facts/a.yaml}}]\n")
    assert sorted(imported(load_world(root, conventional), conventional)) == [("lore-keeper", "facts", "first")]
    shutil.rmtree(root / "facts")
    write(root, "world.yaml", "name: Plain\n")
    assert imported(load_world(root, conventional), conventional) == {}


def test_the_receivers_dataset_rules_are_checked_at_scan(tmp_path: Path, packages) -> None:
    """A namespace that is also a dataset (same schema, the registry requires it) receives whole records as sets."""
    plugin = Path(shutil.copytree(WORLD_PLUGINS / "lore-keeper", tmp_path / "plugins" / "lore-keeper"))
    edit(plugin, "PLUGIN.md", "contributes:\n", "contributes:\n  datasets:\n    facts: {schema: ./schemas/fact.schema.json, ops: [merge]}\n")
    strict = [load_package(plugin, source="builtin"), packages[1]]
    assert strict[0].loaded, [str(d) for d in strict[0].diagnostics]
    assert problems(load_world(TIDEFALL, strict)) == {("data-dataset-refuses", "world.yaml", "data[0].to")}
    edit(plugin, "PLUGIN.md", "ops: [merge]", "ops: [set, merge]")
    assert load_world(TIDEFALL, [load_package(plugin, source="builtin"), packages[1]]).state is WorldState.LOADED


def test_a_world_with_more_data_than_a_session_imports_fails(packages, monkeypatch) -> None:
    monkeypatch.setattr("services.registry.world_data.MAX_IMPORT_RECORDS", 3)
    world = load_world(TIDEFALL, packages)
    assert world.state is WorldState.FAILED and problems(world) == {("data-too-large", "world.yaml", "data")}

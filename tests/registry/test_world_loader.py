"""The world package loader (services/registry/world_loader.py): what it reads from a world folder,
and the diagnostic (file, field, code) each kind of mistake gets. No server: the catalogue's
scan and the RPCs are tested through the five services in tests/e2e/test_worlds.py."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from services.registry.loaded_package import LoadedPackage
from services.registry.loaded_world import WorldState
from services.registry.package_loader import load_package
from services.registry.world_catalogue import scan_worlds
from services.registry.world_loader import load_world, load_world_guarded
from services.registry.world_proto import world_to_proto
from shared.settings import REPO_ROOT
from shared.structs import from_struct, from_value

TIDEFALL = REPO_ROOT / "tests" / "fixtures" / "worlds" / "tidefall"
WORLD_PLUGINS = REPO_ROOT / "tests" / "fixtures" / "world-plugins"


@pytest.fixture(scope="module")
def packages() -> list[LoadedPackage]:
    """The receiving fixture plugin and the dice-check plugin the world presets settings of."""
    return [load_package(WORLD_PLUGINS / "lore-keeper", source="builtin"), load_package(REPO_ROOT / "plugins" / "dice-check", source="builtin")]


@pytest.fixture
def tidefall(tmp_path: Path) -> Path:
    """A copy of the fixture world to break."""
    return Path(shutil.copytree(TIDEFALL, tmp_path / "tidefall"))


def write(root: Path, relative: str, text: str) -> None:
    (root / relative).parent.mkdir(parents=True, exist_ok=True)
    (root / relative).write_text(textwrap.dedent(text), encoding="utf-8")


def edit(root: Path, relative: str, old: str, new: str) -> None:
    text = (root / relative).read_text(encoding="utf-8")
    assert old in text, f"{relative} has no {old!r}"
    (root / relative).write_text(text.replace(old, new), encoding="utf-8")


def problems(world) -> set[tuple[str, str, str]]:
    return {(d.code, d.file, d.field_path) for d in world.diagnostics if d.is_error}


def test_the_fixture_world_loads_with_every_part(packages) -> None:
    world = load_world(TIDEFALL, packages)
    assert world.state is WorldState.LOADED, [str(d) for d in world.diagnostics]
    assert world.diagnostics == []
    assert [c["id"] for c in world.characters] == ["wren", "ossa"]
    # A characterField is the plugin's data, not part of the character the world model stores.
    assert "blueprint" not in world.characters[1] and world.character_data == {"blueprint": {"ossa": {"voice": "whispering"}}}
    assert world.character_schema == {
        "types": ["player", "npc", "spirit"],
        "attributes": {"courage": {"name": "Courage", "type": "integer", "min": 0, "max": 10, "default": 5},
                       "oath": {"name": "Oath", "type": "string", "options": ["none", "sworn", "broken"]}},
    }
    assert [(d.id, d.initial) for d in world.dimensions] == [("tide", {"level": "low", "hoursLeft": 6}), ("dread", 1)]
    rules = world.data_sources[1]
    assert (rules.contract, rules.visibility, rules.files) == ("example.rules@1", "hidden", ("data/rules/01-flood.yaml", "data/rules/02-calm.yaml"))
    assert world.data_sources[2].kind == "document" and world.data_sources[3].character_field == "blueprint"
    assert sorted(world.translations) == ["zh"] and world.missing_plugins == []


def test_a_translation_gives_the_texts_of_its_language_matched_by_id(packages) -> None:
    world = load_world(TIDEFALL, packages)
    english, chinese, fallback = world_to_proto(world), world_to_proto(world, "zh"), world_to_proto(world, "zh-CN")
    assert (english.name, english.locale, chinese.name, chinese.locale) == ("Tidefall", "", "潮落城", "zh")
    assert fallback.locale == "zh" and fallback.opening == chinese.opening
    ossa = from_struct(chinese.characters[1])
    assert ossa["name"] == "溺亡的奥莎" and ossa["aliases"] == ["Ossa", "奥莎"]
    assert from_struct(chinese.character_schema)["attributes"]["courage"]["name"] == "勇气"
    assert [d.name for d in chinese.dimensions] == ["潮汐", "Dread"]
    author = from_struct(chinese.author)
    assert author["name"] == "Jane Doe" and author["about"] == "我写沉没的小世界。" and author["links"][0]["label"] == "社区"
    assert from_value(english.dimensions[0].initial) == {"level": "low", "hoursLeft": 6}
    assert list(english.plugin_policy.plus) == ["lore-keeper", "dice-check"] and from_struct(english.plugin_settings["dice-check"]) == {"dc": 12}


def test_a_summary_leaves_out_what_a_session_starts_with(packages) -> None:
    summary = world_to_proto(load_world(TIDEFALL, packages), summary=True)
    assert summary.name == "Tidefall" and summary.version == "1.2.0" and list(summary.locales) == ["zh"]
    assert not summary.opening and not summary.characters and not summary.dimensions


def test_world_yaml_mistakes_name_the_field(tidefall: Path, packages) -> None:
    edit(tidefall, "world.yaml", "name: Tidefall", "nmae: Tidefall")
    edit(tidefall, "world.yaml", "homepage: https://example.com/tidefall", "homepage: http://example.com/tidefall")
    edit(tidefall, "world.yaml", "  - to: contract:example.facts@1", "  - to: example.facts@1")
    edit(tidefall, "world.yaml", "    initial: 1\n", "")
    edit(tidefall, "world.yaml", "characterField: blueprint", "characterField: blueprint\n    source: {path: x.yaml}")
    world = load_world(tidefall, packages)
    assert world.state is WorldState.FAILED
    assert problems(world) == {("unknown-key", "world.yaml", "nmae"), ("missing-field", "world.yaml", "name"),
                               ("insecure-link", "world.yaml", "homepage"), ("invalid-data-target", "world.yaml", "data[0].to"),
                               ("missing-field", "world.yaml", "dimensions.dread.initial"), ("data-source-place", "world.yaml", "data[3]")}
    unknown = next(d for d in world.diagnostics if d.code == "unknown-key")
    assert unknown.hint == "did you mean `name`?"


@pytest.mark.parametrize(("text", "code"), [
    ("name: [unclosed", "world-yaml"),
    ("- just a list", "world-not-mapping"),
    ("", "world-not-mapping"),
    ("name: x\nblob: !!binary aGVsbG8=", "world-value-not-json"),
    ("a: &a [*a]", "world-yaml"),
])
def test_an_unreadable_world_yaml_fails_the_world_alone(tmp_path: Path, text: str, code: str) -> None:
    write(tmp_path / "broken", "world.yaml", text)
    write(tmp_path / "fine", "world.yaml", "name: Fine\n")
    worlds = scan_worlds([tmp_path], [])
    assert [(w.id, w.state) for w in worlds] == [("broken", WorldState.FAILED), ("fine", WorldState.LOADED)]
    assert {d.code for d in worlds[0].diagnostics} == {code} and worlds[0].diagnostics[0].file == "world.yaml"


def test_a_folder_without_world_yaml_or_with_a_bad_id(tmp_path: Path) -> None:
    write(tmp_path / "Bad Name", "world.yaml", "name: x\n")
    write(tmp_path / "empty", "notes.txt", "")
    write(tmp_path / "other", "world.yaml", "name: x\nid: another\n")
    codes = {w.id: {d.code for d in w.diagnostics} for w in scan_worlds([tmp_path], [])}
    assert codes == {"Bad Name": {"invalid-id"}, "empty": {"world-manifest-missing"}, "other": {"id-mismatch"}}


def test_the_first_world_of_an_id_wins_and_the_warning_names_no_host_path(tmp_path: Path) -> None:
    write(tmp_path / "a" / "same", "world.yaml", "name: First\n")
    write(tmp_path / "b" / "same", "world.yaml", "name: Second\n")
    [world] = scan_worlds([tmp_path / "a", tmp_path / "b"], [])
    assert world.manifest is not None and world.manifest.name == "First" and world.state is WorldState.LOADED
    [warning] = world.diagnostics
    assert warning.code == "duplicate-world" and str(tmp_path) not in warning.message


def test_characters_are_checked_against_the_character_schema(tidefall: Path, packages) -> None:
    write(tidefall, "cast.yaml", """\
        - {id: wren, name: Wren, type: player, attributes: {courage: 11, luck: 3}}
        - {id: ossa, name: Ossa, type: ghost, attributes: {oath: maybe, courage: 2.5}, colour: red}
        - {id: ossa, name: Twin}
        - {name: Nameless}
        """)
    assert problems(load_world(tidefall, packages)) == {
        ("attribute-invalid", "cast.yaml", "[0].attributes.courage"),
        ("unknown-attribute", "cast.yaml", "[0].attributes.luck"),
        ("unknown-character-type", "cast.yaml", "[1].type"),
        ("attribute-invalid", "cast.yaml", "[1].attributes.oath"),
        ("attribute-invalid", "cast.yaml", "[1].attributes.courage"),
        ("unknown-key", "cast.yaml", "[1].colour"),
        ("duplicate-character", "cast.yaml", "[2].id"),
        ("missing-field", "cast.yaml", "[3].id"),
    }


def test_inline_characters_and_the_conventional_characters_file(tmp_path: Path) -> None:
    write(tmp_path / "inline", "world.yaml", "name: x\ncharacters:\n  - {id: a, name: A, mood: grim}\n")
    write(tmp_path / "conventional", "world.yaml", "name: x\n")
    write(tmp_path / "conventional", "characters.yaml", "characters:\n  - {id: b, name: B}\n  - {id: c}\n")
    write(tmp_path / "missing", "world.yaml", "name: x\ncharacters: ./nobody.yaml\n")
    write(tmp_path / "outside", "world.yaml", "name: x\ncharacters: ../inline/world.yaml\n")
    worlds = {w.id: w for w in scan_worlds([tmp_path], [])}
    assert problems(worlds["inline"]) == {("unknown-key", "world.yaml", "characters[0].mood")}
    assert problems(worlds["conventional"]) == {("missing-field", "characters.yaml", "characters[1].name")}
    assert worlds["conventional"].characters == [{"id": "b", "name": "B", "type": "npc"}]
    assert problems(worlds["missing"]) == {("file-missing", "world.yaml", "characters")}
    assert problems(worlds["outside"]) == {("file-outside-package", "world.yaml", "characters")}


def test_dimensions_need_a_valid_schema_and_an_initial_value_it_allows(tidefall: Path, packages) -> None:
    edit(tidefall, "world.yaml", "initial: 1", "initial: 9")
    edit(tidefall, "world.yaml", "schema: ./schemas/tide.json", "schema: ./schemas/none.json")
    edit(tidefall, "world.yaml", "pluginPolicy:", "  broken: {name: Broken, schema: {type: nope}, initial: 1}\npluginPolicy:")
    assert problems(load_world(tidefall, packages)) == {
        ("dimension-initial-invalid", "world.yaml", "dimensions.dread.initial"),
        ("file-missing", "world.yaml", "dimensions.tide.schema"),
        ("dimension-schema-invalid", "world.yaml", "dimensions.broken.schema"),
    }


def test_data_sources_stay_inside_the_package_and_their_files_must_exist(tidefall: Path, packages) -> None:
    edit(tidefall, "world.yaml", "source: {path: data/facts.yaml}", "source: {path: ../secrets.yaml}")
    edit(tidefall, "world.yaml", "source: {path: lore/*.md}", "source: {path: lo*/*.md}")
    edit(tidefall, "world.yaml", "source: {path: data/rules/*.yaml, key: name}", "source: {path: data/missing.yaml}")
    assert problems(load_world(tidefall, packages)) == {
        ("file-outside-package", "world.yaml", "data[0].source.path"),
        ("file-missing", "world.yaml", "data[1].source.path"),
        ("data-source-glob", "world.yaml", "data[2].source.path"),
    }


def test_records_are_checked_for_the_plugins_that_accept_them(tidefall: Path, packages) -> None:
    (tidefall / "data" / "facts.zh.yaml").unlink()
    write(tidefall, "data/facts.yaml", """\
        - id: bells
          text: The bells ring.
          attributes: [{id: bravery}, {id: oath}, {id: courage, base: 1, max: 30}]
          seenAt: "2024-01-01T10:00:00Z"
        - text: no id
        - {id: mute}
        """)
    write(tidefall, "data/rules/01-flood.yaml", """\
        name: flood
        when: {all: [{dimension: tide, path: depth}, {dimension: tide, path: level, in: [rising, boiling]}, {dimension: wind}]}
        """)
    world = load_world(tidefall, packages)
    assert problems(world) == {
        ("data-record-key", "data/facts.yaml", "[1]"),
        ("data-record-invalid", "data/facts.yaml", "[2]"),
        ("attribute-reference", "data/facts.yaml", "[0].attributes[0].id"),
        ("attribute-reference", "data/facts.yaml", "[0].attributes[1].id"),
        ("attribute-reference", "data/facts.yaml", "[0].attributes[2].max"),
        ("dimension-reference", "data/rules/01-flood.yaml", "when.all[0].path"),
        ("dimension-reference", "data/rules/01-flood.yaml", "when.all[1].in[1]"),
        ("dimension-reference", "data/rules/01-flood.yaml", "when.all[2].dimension"),
    }
    reminder = next(d for d in world.diagnostics if d.code == "model-hidden-field")
    assert (reminder.severity.value, reminder.file, reminder.field_path) == ("warning", "data/facts.yaml", "[0].seenAt")


def test_without_a_character_schema_or_dimensions_references_are_not_checked(tidefall: Path, packages) -> None:
    text = (tidefall / "world.yaml").read_text()
    text = text[: text.index("characterSchema:")] + text[text.index("pluginPolicy:"):]
    (tidefall / "world.yaml").write_text(text)
    (tidefall / "world.zh.yaml").unlink()
    (tidefall / "data" / "facts.zh.yaml").unlink()
    write(tidefall, "cast.yaml", "- {id: wren, name: Wren, blueprint: {voice: low}}\n")
    write(tidefall, "data/facts.yaml", "- {id: a, text: t, attributes: [{id: anything}]}\n")
    write(tidefall, "data/rules/01-flood.yaml", "name: flood\nwhen: {dimension: anywhere}\n")
    assert problems(load_world(tidefall, packages)) == set()


def test_settings_presets_and_plugins_are_checked_against_the_installed_plugins(tidefall: Path, packages) -> None:
    edit(tidefall, "world.yaml", "    dc: 12", "    dc: 99\n    luck: 1\n  not-installed:\n    x: 1")
    edit(tidefall, "world.yaml", "plus: [lore-keeper, dice-check]", "plus: [lore-keeper, dice-check, gone]\n  preset: adventure")
    world = load_world(tidefall, packages)
    assert problems(world) == {("world-setting-invalid", "world.yaml", "pluginSettings.dice-check.dc"),
                               ("world-setting-invalid", "world.yaml", "pluginSettings.dice-check.luck")}
    warnings = {(d.code, d.field_path) for d in world.diagnostics if not d.is_error}
    assert warnings == {("world-plugin-missing", "pluginPolicy.plus[2]"), ("world-plugin-missing", "pluginSettings.not-installed"),
                        ("world-pack-missing", "pluginPolicy.preset")}
    assert world.state is WorldState.FAILED and world.missing_plugins == ["gone"]


def test_translation_mistakes_name_their_file(tidefall: Path, packages) -> None:
    write(tidefall, "world.zh.yaml", "characters:\n  nobody: {name: 无人}\nauthor: {links: [{label: a}, {label: b}]}\n")
    write(tidefall, "world.ja.yaml", "title: x\n")
    write(tidefall, "world.chinese!.yaml", "name: x\n")
    assert problems(load_world(tidefall, packages)) == {
        ("world-translation-unknown-id", "world.zh.yaml", "characters.nobody"),
        ("world-translation-unknown-id", "world.zh.yaml", "author.links"),
        ("unknown-key", "world.ja.yaml", "title"),
        ("world-translation-name", "world.chinese!.yaml", ""),
    }


def test_an_unforeseen_failure_fails_that_world_alone(tidefall: Path, monkeypatch) -> None:
    import services.registry.world_checks as checks

    def explode(*args, **kwargs):
        raise RecursionError("deep")

    monkeypatch.setattr(checks, "check_world", explode)
    world = load_world_guarded(tidefall)
    assert world.state is WorldState.FAILED and [d.code for d in world.diagnostics] == ["world-unloadable"]
    assert "deep" not in world.diagnostics[0].message


# ----- covel validate-world --------------------------------------------------------------------


def test_validate_world_prints_like_validate_plugin_and_exits_the_same_way(tidefall: Path, capsys) -> None:
    import io

    from covel_cli.main import main
    from covel_cli.validate_world import run

    out, err = io.StringIO(), io.StringIO()
    assert run([str(TIDEFALL), str(REPO_ROOT / "worlds" / "demo-world" / "world.yaml")], out, err, plugin_dirs=[REPO_ROOT / "plugins", WORLD_PLUGINS]) == 0
    text = out.getvalue()
    assert f"✓ tidefall: {TIDEFALL}\n  languages: world.yaml, zh\n" in text and "✓ demo-world: " in text
    assert text.endswith("2 of 2 world(s) valid\n") and err.getvalue() == ""

    edit(tidefall, "cast.yaml", "attributes: {courage: 6}", "attributes: {courage: 60}")
    out = io.StringIO()
    assert run([str(tidefall)], out, err, plugin_dirs=[REPO_ROOT / "plugins", WORLD_PLUGINS]) == 1
    assert "✗ tidefall: " in out.getvalue()
    assert "  error: cast.yaml:[0].attributes.courage: attribute-invalid `courage` must be within 0..10, not 60\n" in out.getvalue()
    assert out.getvalue().endswith("0 of 1 world(s) valid\n")

    assert main(["validate-world", str(tidefall.parent)]) == 2
    assert "is not a world package" in capsys.readouterr().err

"""A world's lorebook (services/registry/world_lorebook.py): inline or a file of the package, checked
entry by entry, translated by id, and what a session starts with (owner world)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from services.registry.loaded_world import WorldState
from services.registry.world_loader import load_world
from services.registry.world_proto import world_to_proto


def world(tmp_path: Path, yaml: str, files: dict[str, str] | None = None):
    root = tmp_path / "w"
    root.mkdir(exist_ok=True)
    (root / "world.yaml").write_text(textwrap.dedent(yaml), encoding="utf-8")
    for name, text in (files or {}).items():
        (root / name).write_text(textwrap.dedent(text), encoding="utf-8")
    return load_world(root, [])


def problems(loaded) -> set[tuple[str, str, str]]:
    return {(d.code, d.file, d.field_path) for d in loaded.diagnostics if d.is_error}


def test_an_inline_lorebook_is_read_and_translated(tmp_path: Path) -> None:
    loaded = world(tmp_path, """\
        name: Harbor
        lorebook:
          - {id: lighthouse, title: The lighthouse, keys: [lighthouse, lamp], content: Its lens was stolen.}
          - {id: salt, content: Everything here tastes of salt., constant: true}
        """, {"world.zh.yaml": "lorebook:\n  lighthouse: {title: 灯塔, keys: [灯塔], content: 它的透镜被偷了。}\n"})
    assert loaded.state is WorldState.LOADED, [str(d) for d in loaded.diagnostics]
    english, chinese = world_to_proto(loaded).lorebook, world_to_proto(loaded, "zh").lorebook
    assert [(e.id, e.title, list(e.keys), e.constant) for e in english] == [
        ("lighthouse", "The lighthouse", ["lighthouse", "lamp"], False), ("salt", "", [], True)]
    assert (chinese[0].title, list(chinese[0].keys), chinese[0].content) == ("灯塔", ["灯塔"], "它的透镜被偷了。")
    assert chinese[1].content == "Everything here tastes of salt."


def test_lorebook_yaml_is_read_by_convention(tmp_path: Path) -> None:
    loaded = world(tmp_path, "name: Harbor\n", {"lorebook.yaml": "- {id: gull, keys: [gull], content: The gulls know.}\n"})
    assert [e.id for e in world_to_proto(loaded).lorebook] == ["gull"]


def test_a_broken_entry_is_named_by_file_and_field(tmp_path: Path) -> None:
    loaded = world(tmp_path, "name: Harbor\nlorebook: ./lore/book.yaml\n", None)
    (tmp_path / "w" / "lore").mkdir()
    (tmp_path / "w" / "lore" / "book.yaml").write_text(textwrap.dedent("""\
        lorebook:
          - {id: a, keys: [x], content: fine}
          - {id: a, keys: [y], content: again}
          - {id: b, content: reaches no story}
          - {id: c, keys: [z]}
          - {id: d, keys: [w], content: ok, colour: red}
        """), encoding="utf-8")
    (tmp_path / "w" / "world.zh.yaml").write_text("lorebook:\n  nope: {title: 无}\n", encoding="utf-8")
    loaded = load_world(tmp_path / "w", [])
    assert problems(loaded) == {
        ("duplicate-lorebook-entry", "lore/book.yaml", "lorebook[1].id"),
        ("lorebook-entry-invalid", "lore/book.yaml", "lorebook[2].keys"),
        ("missing-field", "lore/book.yaml", "lorebook[3].content"),
        ("unknown-key", "lore/book.yaml", "lorebook[4].colour"),
        ("world-translation-unknown-id", "world.zh.yaml", "lorebook.nope"),
    }


def test_activation_rules_openings_and_settings_reach_the_worlds_proto(tmp_path: Path) -> None:
    loaded = world(tmp_path, """\
        name: Harbor
        opening: Rain.
        openings: [{id: greeting-1, text: Fog.}, {id: group-1, text: Everyone looks up., groupOnly: true}]
        lorebookSettings: {scanDepth: 4, tokenBudget: 900}
        lorebook:
          - {id: storm, keys: ["/sto+rm/i"], content: Six boats., activation: {sticky: 2, position: atDepth, depth: 0, role: user}}
        """)
    assert loaded.state is WorldState.LOADED, [str(d) for d in loaded.diagnostics]
    proto = world_to_proto(loaded)
    assert (proto.lorebook[0].activation.sticky, proto.lorebook[0].activation.position, proto.lorebook[0].activation.role) == (2, "atDepth", "user")
    assert proto.lorebook[0].activation.has_depth and proto.lorebook[0].activation.depth == 0
    assert (proto.lorebook_settings.scan_depth, proto.lorebook_settings.token_budget, proto.lorebook_settings.recursive) == (4, 900, True)
    assert [(o.id, o.group_only) for o in proto.openings] == [("greeting-1", False), ("group-1", True)]


def test_a_regex_key_re2_refuses_and_a_bad_rule_are_named(tmp_path: Path) -> None:
    loaded = world(tmp_path, """\
        name: Harbor
        openings: [{id: a, text: x}, {id: a, text: y}]
        lorebook:
          - {id: back, keys: ["/(a)\\\\1/"], content: x}
          - {id: plain, keys: ["(a"], content: x, activation: {useRegex: true}}
          - {id: second, keys: [x], content: x, activation: {secondaryKeys: ["/(?<=a)b/"]}}
          - {id: logic, keys: [x], content: x, activation: {selectiveLogic: maybe}}
        """)
    assert problems(loaded) == {("lorebook-regex-invalid", "world.yaml", "lorebook[0].keys[0]"),
                                ("lorebook-regex-invalid", "world.yaml", "lorebook[1].keys[0]"),
                                ("lorebook-regex-invalid", "world.yaml", "lorebook[2].activation.secondaryKeys[0]"),
                                ("invalid-value", "world.yaml", "lorebook[3].activation.selectiveLogic"),
                                ("duplicate-opening", "world.yaml", "openings[1].id")}

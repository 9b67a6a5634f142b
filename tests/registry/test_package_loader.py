from __future__ import annotations

import os
from pathlib import Path

import pytest

from services.registry.diagnostics import Severity
from services.registry.loaded_package import PackageState
from services.registry.package_loader import load_package
from shared.settings import default_plugin_dirs
from tests.registry.conftest import FIXTURES, write_plugin

NARRATOR = default_plugin_dirs()[0] / "narrator"


def fixture(case: str, plugin_id: str, **options: object):
    return load_package(FIXTURES / case / plugin_id, source="community", **options)  # type: ignore[arg-type]


# ----- the builtin narrator ---------------------------------------------------------------------


def test_narrator_loads_with_derived_defaults() -> None:
    package = load_package(NARRATOR, source="builtin")
    assert package.state is PackageState.LOADED, [str(d) for d in package.diagnostics]
    assert package.diagnostics == []
    assert package.kind == "core" and package.version == "0.1.0"
    assert package.provides == ["narrative-engine@2"]
    assert package.entry == "server/index.py"  # the narrative-person setting reaches the prompt through a hook
    assert package.tags == ["cost:llm"]
    [runtime] = package.runtimes
    assert runtime.runtime_id == "narrator" and runtime.plugin_id == "narrator"
    assert (runtime.type, runtime.stage, runtime.visibility) == ("agent", "narrative", "story")
    assert runtime.prompt.startswith("You are the narrator")
    assert runtime.prompt_variants["zh"].startswith("你是一个互动故事的叙事者")
    manifest = runtime.manifest
    assert manifest["type"] == "agent" and manifest["file"] == "PLUGIN.md"
    assert manifest["schedule"]["trigger"] == {"type": "auto"}
    assert manifest["schedule"]["every"] == 1
    assert manifest["schedule"]["detached"] is False
    assert manifest["io"]["visibility"] == "story"
    assert manifest["io"]["output"] == {"contract": "narrative-engine@2", "schema": "contract:narrative-engine@2"}
    agent = manifest["agent"]
    assert agent["model"] == "story"
    assert agent["reasoning"] is True
    assert "toolChoice" not in agent
    loop = agent["loop"]
    assert (loop["timeoutMs"], loop["callTimeoutMs"], loop["maxRetries"]) == (240000, 120000, 1)
    assert loop["profile"] == "story" and loop["stream"] is True and loop["truncation"] == "accept"
    assert package.definition["contributes"]["settings"][0]["key"] == "person"
    assert package.definition["provides"] == [{"contract": "narrative-engine@2", "default": True}]


# ----- broken packages: one fixture each, exact code and author's field path ---------------------

BROKEN = [
    # case, plugin id, code, file, field path
    ("engine-marker", "engine-js", "frontmatter-engine", "PLUGIN.md", ""),
    ("bad-yaml", "bad-yaml", "frontmatter-yaml", "PLUGIN.md", ""),
    ("no-frontmatter", "no-frontmatter", "frontmatter-missing", "PLUGIN.md", ""),
    ("not-mapping", "not-mapping", "frontmatter-not-mapping", "PLUGIN.md", ""),
    ("unclosed", "unclosed", "frontmatter-unclosed", "PLUGIN.md", ""),
    ("id-mismatch", "id-mismatch", "id-mismatch", "PLUGIN.md", "id"),
    ("reserved-id", "framework", "reserved-id", "", ""),
    ("mixed-layout", "mixed", "runtime-layout-mixed", "PLUGIN.md", "runtime"),
    ("unknown-hook", "unknown-hook", "unknown-hook-event", "PLUGIN.md", "contributes.hooks[1]"),
    ("bad-enforce", "bad-enforce", "invalid-value", "PLUGIN.md", "contributes.hooks[0].enforce"),
    ("unknown-io-key", "unknown-io-key", "unknown-key", "PLUGIN.md", "runtime.io.conceal"),
    ("bad-visibility", "bad-visibility", "invalid-value", "PLUGIN.md", "runtime.io.visibility"),
    ("entry-missing", "entry-missing", "entry-missing", "PLUGIN.md", "entry"),
    ("entry-outside", "entry-outside", "entry-outside-package", "PLUGIN.md", "entry"),
    ("zh-mismatch", "zh-mismatch", "variant-frontmatter-mismatch", "PLUGIN.zh.md", "runtime.schedule.stage"),
    ("zh-unknown-segment", "zh-unknown-segment", "variant-unknown-segment", "PLUGIN.zh.md", "contributes.prompt[0].id"),
    ("zh-segment-position", "zh-segment-position", "variant-frontmatter-mismatch", "PLUGIN.zh.md", "contributes.prompt[0].position"),
    ("zh-segment-invalid", "zh-segment-invalid", "variant-segment-invalid", "PLUGIN.zh.md", "contributes.prompt[0].content"),
    ("misspelled-field", "misspelled-field", "misspelled-field", "PLUGIN.md", "permision"),
    ("concealed-story", "concealed-story", "concealed-story", "PLUGIN.md", "runtime.io.concealed"),
    ("runtime-package-field", "package-field", "runtime-package-field", "runtimes/extract/RUNTIME.md", "requires"),
    ("cross-package-ref", "cross-ref", "cross-package-runtime-reference", "runtimes/a/RUNTIME.md", "schedule.needs[0]"),
    ("cross-package-ref", "cross-ref", "unqualified-runtime-reference", "runtimes/a/RUNTIME.md", "schedule.after[0]"),
    ("ambiguous-output", "ambiguous-output", "ambiguous-output-contract", "runtimes/two/RUNTIME.md", "io.output.contract"),
    ("bad-contract-id", "bad-contract-id", "invalid-contract-id", "PLUGIN.md", "requires[0]"),
    ("wrong-type", "wrong-type", "invalid-type", "PLUGIN.md", "version"),
    ("wrong-type", "wrong-type", "invalid-value", "PLUGIN.md", "runtime.schedule.every"),
]


@pytest.mark.parametrize(("case", "plugin_id", "code", "file", "field_path"), BROKEN, ids=[f"{b[0]}:{b[2]}" for b in BROKEN])
def test_broken_package_fails_with_exact_diagnostic(case: str, plugin_id: str, code: str, file: str, field_path: str) -> None:
    package = fixture(case, plugin_id)
    assert package.state is PackageState.FAILED
    assert package.runtimes == []
    matching = [d for d in package.diagnostics if d.code == code and d.field_path == field_path]
    assert matching, [str(d) for d in package.diagnostics]
    [diagnostic] = matching
    assert diagnostic.severity is Severity.ERROR
    assert diagnostic.file == file
    assert diagnostic.plugin_id == plugin_id
    assert diagnostic.message


def test_unknown_hook_message_lists_the_events() -> None:
    [diagnostic] = fixture("unknown-hook", "unknown-hook").diagnostics
    assert "OnTurnBegin" in diagnostic.message and "PreToolUse" in diagnostic.message


def test_unknown_key_hint_names_the_close_field() -> None:
    [diagnostic] = fixture("unknown-io-key", "unknown-io-key").diagnostics
    assert "concealed" in diagnostic.hint


WARNED = [
    # case, plugin id, code, file, field path, runtimes still loaded
    ("unknown-top-level", "unknown-top-level", "unknown-field", "PLUGIN.md", "flavour", []),
    ("missing-runtime-md", "missing-md", "runtime-manifest-missing", "runtimes/notes", "", ["missing-md/ok"]),
    ("wrong-case", "wrong-case", "runtime-manifest-case", "runtimes/extract/runtime.md", "", []),
    ("missing-handler", "missing-handler", "handler-missing", "runtimes/calc/RUNTIME.md", "function", []),
    ("missing-stage", "missing-stage", "stage-missing", "PLUGIN.md", "runtime.schedule.stage", []),
]


@pytest.mark.parametrize(("case", "plugin_id", "code", "file", "field_path", "runtimes"), WARNED, ids=[w[0] for w in WARNED])
def test_dropped_parts_are_warnings_and_the_package_loads(
    case: str, plugin_id: str, code: str, file: str, field_path: str, runtimes: list[str]
) -> None:
    package = fixture(case, plugin_id)
    assert package.state is PackageState.LOADED
    [diagnostic] = package.diagnostics
    assert (diagnostic.code, diagnostic.severity, diagnostic.file, diagnostic.field_path) == (
        code,
        Severity.WARNING,
        file,
        field_path,
    )
    assert [runtime.runtime_id for runtime in package.runtimes] == runtimes


@pytest.mark.parametrize(("case", "plugin_id"), [("missing-handler", "missing-handler"), ("missing-stage", "missing-stage")])
def test_strict_mode_makes_unrunnable_runtimes_errors(case: str, plugin_id: str) -> None:
    package = fixture(case, plugin_id, strict=True)
    assert package.state is PackageState.FAILED
    assert [d.severity for d in package.diagnostics] == [Severity.ERROR]


def test_unknown_top_level_field_is_dropped_from_the_definition() -> None:
    package = fixture("unknown-top-level", "unknown-top-level")
    assert "flavour" not in package.definition
    assert package.display_name == "Has a field the host does not know"


# ----- a well-formed multi-runtime package ------------------------------------------------------


def test_multi_runtime_package_defaults() -> None:
    package = fixture("good", "facts")
    assert package.state is PackageState.LOADED, [str(d) for d in package.diagnostics]
    assert package.kind == "plugin" and package.version == "1.2.0"
    assert package.entry == "server/index.py"
    assert package.provides == ["facts.lookup@1", "example.facts@1"]
    assert package.default_provides == ["facts.lookup@1"]
    assert package.requires == ["narrative-engine@2"]
    # Author tags first (cost:/ui: written by the author are ignored), then derived ones.
    assert package.tags == ["mode:any", "cost:llm", "cost:function", "ui:manual-action"]
    assert package.hooks == [("PreToolUse", "normal"), ("TurnStart", "pre")]
    by_id = {runtime.runtime_id: runtime for runtime in package.runtimes}
    assert sorted(by_id) == ["facts/count", "facts/extract", "facts/manual"]

    extract = by_id["facts/extract"].manifest
    assert extract["type"] == "agent" and extract["file"] == "runtimes/extract/RUNTIME.md"
    assert extract["io"]["visibility"] == "system"
    assert extract["io"]["inputs"]["narrative"] == {
        "from": {"contract": "narrative-engine@2", "cardinality": "one"},
        "scope": "turn",
        "required": True,
        "select": "/narrativeOutput",
    }
    assert extract["io"]["inputs"]["digest"] == {"from": {"kernel": "turn-digest@1"}}
    assert extract["io"]["selfData"] == [{"namespace": "facts", "format": "summary", "maxEntries": 50}]
    agent = extract["agent"]
    assert agent["model"] == "plugin"
    assert agent["toolChoice"] == "required"
    assert agent["completion"] == {"require": "tool-use", "afterTools": ["save-facts"]}
    assert agent["tools"]["plugin"] == ["save-facts"]
    loop = agent["loop"]
    assert (loop["timeoutMs"], loop["callTimeoutMs"], loop["maxRetries"], loop["profile"]) == (120000, 60000, 3, "system")
    assert loop["stream"] is False and loop["fallback"] == "fail"
    assert by_id["facts/extract"].prompt_variants == {"zh": "从 runtime-inputs.narrative.value 中提取事实，然后调用 save-facts。"}

    count = by_id["facts/count"].manifest
    assert count["type"] == "function" and "agent" not in count
    assert count["function"] == {"handler": "runtimes/count/handler.py", "tools": [], "timeoutMs": 5000}
    assert count["schedule"]["needs"] == [{"runtime": "facts/extract", "cardinality": "one"}]
    assert count["schedule"]["detached"] == {"settle": True, "maxSettleWaitMs": 1000}

    manual = by_id["facts/manual"]
    assert manual.stage == "" and manual.trigger_type == "manual"
    assert manual.manifest["function"]["handler"] == "lib/manual.py"
    assert manual.manifest["function"]["model"] == "memory"

    contributes = package.definition["contributes"]
    assert contributes["hooks"] == [{"event": "PreToolUse", "enforce": "normal"}, {"event": "TurnStart", "enforce": "pre"}]
    assert contributes["services"] == [{"contract": "facts.lookup@1", "modelFacing": False, "access": "read"}]
    assert package.definition["runtimes"] == ["facts/count", "facts/extract", "facts/manual"]


def test_inline_runtime_gets_contributed_tools_and_every() -> None:
    package = fixture("good", "solo")
    [runtime] = package.runtimes
    assert runtime.runtime_id == "solo"
    assert runtime.manifest["schedule"]["every"] == 3
    assert runtime.manifest["agent"]["tools"]["plugin"] == ["note"]
    assert runtime.manifest["agent"]["model"] == "plugin"


def test_symlinked_runtime_folder_is_ignored(tmp_path: Path) -> None:
    root = write_plugin(tmp_path, "linked", "displayName: Linked", files={"runtimes/real/RUNTIME.md": "---\nschedule:\n  stage: audit\n---\nReal.\n"})
    elsewhere = tmp_path / "elsewhere" / "ghost"
    elsewhere.mkdir(parents=True)
    (elsewhere / "RUNTIME.md").write_text("---\nschedule:\n  stage: audit\n---\nGhost.\n", encoding="utf-8")
    os.symlink(elsewhere, root / "runtimes" / "ghost", target_is_directory=True)
    package = load_package(root, source="community")
    assert package.state is PackageState.LOADED
    assert [runtime.runtime_id for runtime in package.runtimes] == ["linked/real"]
    assert [d.code for d in package.diagnostics] == ["runtime-symlink-ignored"]
    assert package.diagnostics[0].severity is Severity.INFO


def test_function_runtime_type_and_cost_tag(tmp_path: Path) -> None:
    root = write_plugin(
        tmp_path,
        "fn",
        "runtime:\n  schedule:\n    stage: post-turn\n  function: {}",
        files={"handler.py": "async def handler(ctx):\n    return None\n"},
    )
    package = load_package(root, source="community")
    assert package.state is PackageState.LOADED, [str(d) for d in package.diagnostics]
    [runtime] = package.runtimes
    assert runtime.type == "function" and runtime.manifest["function"]["handler"] == "handler.py"
    assert package.tags == ["cost:function"]


def test_entry_defaults_to_server_index_py_only_when_present(tmp_path: Path) -> None:
    with_entry = write_plugin(tmp_path, "with-entry", "kind: plugin", files={"server/index.py": "def register(covel): ...\n"})
    without = write_plugin(tmp_path, "without-entry", "kind: plugin")
    assert load_package(with_entry, source="community").entry == "server/index.py"
    assert load_package(with_entry, source="community").tags == ["cost:function"]
    assert load_package(without, source="community").entry == ""


def test_variant_with_empty_frontmatter_is_fine(tmp_path: Path) -> None:
    root = write_plugin(tmp_path, "v", "runtime:\n  schedule:\n    stage: audit", body="Check.", files={"PLUGIN.zh.md": "---\n---\n检查。\n"})
    package = load_package(root, source="community")
    assert package.diagnostics == []
    assert package.runtimes[0].prompt_variants == {"zh": "检查。"}


WORLD = """
displayName: World
contributes:
  prompt:
    - id: world
      position: system
      content: The harbor town of Saltmere.
    - id: rules
      position: {depth: 1}
      role: user
      content: Keep it short.
"""


def test_variant_translates_fixed_segments_by_id(tmp_path: Path) -> None:
    zh = "---\ncontributes:\n  prompt:\n    - id: world\n      content: 港口小镇盐沼镇。\n---\n"
    package = load_package(write_plugin(tmp_path, "w", WORLD, files={"PLUGIN.zh.md": zh}), source="community")
    assert package.diagnostics == []
    # Only the content is translated; the untranslated segment stays English; ids and positions are the main file's.
    assert package.prompt_segment_variants == {"zh": {"world": "港口小镇盐沼镇。"}}
    assert package.definition["promptSegmentVariants"] == {"zh": {"world": "港口小镇盐沼镇。"}}
    assert [segment["content"] for segment in package.definition["contributes"]["prompt"]] == [
        "The harbor town of Saltmere.", "Keep it short."]
    assert package.prompt_variants == {}


def test_translated_segments_count_as_a_zh_instruction_language(tmp_path: Path) -> None:
    from services.registry.package_validator import validate_package

    zh = "---\ncontributes:\n  prompt:\n    - id: world\n      content: 港口小镇盐沼镇。\n---\n"
    report = validate_package(write_plugin(tmp_path, "w", WORLD, files={"PLUGIN.zh.md": zh}))
    assert report.ok and report.languages() == (["en"], ["en", "zh"])


def test_variant_may_repeat_the_main_files_fields(tmp_path: Path) -> None:
    zh = """---
displayName: World
contributes:
  prompt:
    - id: rules
      position: {depth: 1}
      role: user
      content: 简短些。
    - id: world
      position: system
      content: 港口小镇盐沼镇。
---
"""
    package = load_package(write_plugin(tmp_path, "w", WORLD, files={"PLUGIN.zh.md": zh}), source="community", strict=True)
    assert package.loaded and package.diagnostics == []
    assert package.prompt_segment_variants == {"zh": {"rules": "简短些。", "world": "港口小镇盐沼镇。"}}


@pytest.mark.parametrize(
    ("zh", "code", "field_path"),
    [
        # A label is translated in locales/zh.yaml, not in the variant.
        ("displayName: 世界", "variant-frontmatter-mismatch", "displayName"),
        ("contributes:\n  prompt:\n    - id: world\n      role: user\n      content: 盐沼镇。", "variant-frontmatter-mismatch", "contributes.prompt[0].role"),
        ("contributes:\n  tools: [note]\n  prompt:\n    - id: world\n      content: 盐沼镇。", "variant-frontmatter-mismatch", "contributes.tools"),
        # Content only follows the segment at its position; the main file has two segments.
        ("contributes:\n  prompt:\n    - content: 盐沼镇。\n    - content: 盐沼。\n    - content: 镇。", "variant-segment-invalid", "contributes.prompt[2].id"),
        ("contributes:\n  prompt:\n    world: 盐沼镇。", "variant-segment-invalid", "contributes.prompt"),
        ("contributes:\n  prompt:\n    - {id: world, content: 盐沼镇。}\n    - {id: world, content: 盐沼。}", "duplicate-prompt-id", "contributes.prompt[1].id"),
    ],
)
def test_variant_cannot_change_structure(tmp_path: Path, zh: str, code: str, field_path: str) -> None:
    package = load_package(write_plugin(tmp_path, "w", WORLD, files={"PLUGIN.zh.md": f"---\n{zh}\n---\n"}), source="community")
    assert package.state is PackageState.FAILED
    assert [(d.code, d.file, d.field_path) for d in package.diagnostics] == [(code, "PLUGIN.zh.md", field_path)]


def test_runtime_variant_has_no_segments_to_translate(tmp_path: Path) -> None:
    zh = "---\ncontributes:\n  prompt:\n    - {id: world, content: 盐沼镇。}\n---\n提取。\n"
    root = write_plugin(tmp_path, "r", WORLD, files={"runtimes/x/RUNTIME.md": "---\nschedule:\n  stage: audit\n---\nExtract.\n",
                                                    "runtimes/x/RUNTIME.zh.md": zh})
    package = load_package(root, source="community")
    assert [(d.code, d.file) for d in package.diagnostics] == [("variant-unknown-segment", "runtimes/x/RUNTIME.zh.md")]


def test_variant_body_without_an_inline_runtime_is_reported(tmp_path: Path) -> None:
    package = load_package(write_plugin(tmp_path, "w", WORLD, files={"PLUGIN.zh.md": "---\n---\n港口小镇盐沼镇。\n"}), source="community")
    assert package.loaded
    [diagnostic] = package.diagnostics
    assert (diagnostic.code, diagnostic.severity, diagnostic.file) == ("variant-body-unused", Severity.WARNING, "PLUGIN.zh.md")
    assert "contributes.prompt" in (diagnostic.hint or "")


def test_demo_world_has_its_world_text_in_chinese() -> None:
    package = load_package(default_plugin_dirs()[0] / "demo-world", source="builtin", strict=True)
    assert package.loaded and package.diagnostics == [], [str(d) for d in package.diagnostics]
    [world] = package.definition["contributes"]["prompt"]
    assert world["id"] == "world" and world["content"].startswith("World: Saltmere")
    assert package.definition["promptSegmentVariants"]["zh"]["world"].startswith("世界：盐沼镇")


@pytest.mark.parametrize(
    ("frontmatter", "code", "field_path"),
    [
        ("runtime:\n  schedule:\n    stage: narrative\n  io:\n    visibility: story\n  agent:\n    loop:\n      profile: story\n      stream: false", "truncation-without-stream", "runtime.agent.loop.truncation"),
        ("runtime:\n  schedule:\n    stage: audit\n  agent:\n    loop:\n      profile: story", "story-profile", "runtime.agent.loop.profile"),
        ("runtime:\n  schedule:\n    stage: narrative\n    detached: true", "detached-stage", "runtime.schedule.detached"),
        ("runtime:\n  schedule:\n    trigger: {type: manual}\n    stage: audit", "stage-not-allowed", "runtime.schedule.stage"),
        ("runtime:\n  schedule:\n    stage: audit\n  agent:\n    finishWith: x\n    completion: {require: tool-use}", "finish-with-and-completion", "runtime.agent.completion"),
        ("runtime:\n  schedule:\n    stage: audit\n  io:\n    inputs:\n      d:\n        from: {kernel: turn-digest@1}\n        required: false", "kernel-input-option", "runtime.io.inputs.d.required"),
        ("runtime:\n  schedule:\n    stage: narrative\n  io:\n    visibility: story\n    inputs:\n      n:\n        from: {contract: scene@1}", "story-required-input", "runtime.io.inputs.n.required"),
        ("contributes:\n  actions: ['covel:approve']", "reserved-action-prefix", "contributes.actions[0]"),
        ("contributes:\n  settings:\n    - key: k\n      type: text\n      colour: red", "unknown-key", "contributes.settings[0].colour"),
        ("permissions:\n  fs: [read]", "unknown-key", "permissions.fs"),
        ("runtime:\n  gaurd: ./guard.py\n  schedule:\n    stage: audit", "misspelled-field", "runtime.gaurd"),
        ("runtime:\n  schedule:\n    stage: audit\n  guard: ./guard.py", "guard-missing", "runtime.guard"),
        ("runtime:\n  schedule:\n    stage: audit\n  agent: {}\n  function: {}", "agent-and-function", "runtime.agent"),
        ("contributes:\n  settings:\n    - type: text", "missing-field", "contributes.settings[0].key"),
    ],
)
def test_cross_field_rules(tmp_path: Path, frontmatter: str, code: str, field_path: str) -> None:
    root = write_plugin(tmp_path, "rules", frontmatter, body="Prompt.", files={"handler.py": "async def handler(ctx): ...\n"})
    package = load_package(root, source="community")
    found = [(d.code, d.field_path) for d in package.diagnostics]
    assert (code, field_path) in found, found
    assert package.state is PackageState.FAILED

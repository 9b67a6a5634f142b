"""Validation (strict mode): advice warnings, the good corpus, `covel validate-plugin`, and a
property test that mutated manifests only ever give diagnostics."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from covel_cli.main import build_parser
from covel_cli.validate_plugin import run
from services.registry.diagnostics import Severity
from services.registry.loaded_package import PackageState
from services.registry.package_loader import load_package
from services.registry.package_validator import NotAPackage, package_root_of, validate_package
from shared.settings import default_plugin_dirs
from tests.registry.conftest import FIXTURES

BUILTIN_DIR = default_plugin_dirs()[0]
GOOD = sorted(path for path in (FIXTURES / "good").iterdir() if path.is_dir())


def test_builtin_plugins_validate_without_warnings() -> None:
    for root in sorted(path for path in BUILTIN_DIR.iterdir() if (path / "PLUGIN.md").is_file()):
        report = validate_package(root, source="builtin")
        assert report.ok and report.diagnostics == [], [str(d) for d in report.diagnostics]


@pytest.mark.parametrize("root", [path for path in GOOD if path.name != "solo"], ids=lambda path: path.name)
def test_good_corpus_validates_clean(root: Path) -> None:
    report = validate_package(root)
    assert report.ok and report.diagnostics == [], [str(d) for d in report.diagnostics]


ADVICE = [
    ("derived-value", "id"),
    ("default-value", "kind"),
    ("derived-value", "entry"),
    ("derived-value", "provides[0]"),
    ("version-missing", "version"),
    ("shorter-form", "contributes.hooks[0]"),
    ("shorter-form", "contributes.extensions[0]"),
    ("default-value", "runtime.schedule.trigger.type"),
    ("default-value", "runtime.schedule.every"),
    ("default-value", "runtime.io.visibility"),
    ("default-value", "runtime.agent.model"),
    ("shorter-form", "runtime.agent.completion"),
    ("default-value", "runtime.agent.loop.profile"),
    ("default-value", "runtime.agent.loop.timeoutMs"),
]


def test_validation_advises_on_defaults_and_shorter_forms_but_passes() -> None:
    report = validate_package(FIXTURES / "advice" / "advice")
    assert report.ok
    assert [(d.code, d.field_path) for d in report.warnings] == ADVICE
    default = next(d for d in report.warnings if d.code == "default-value")
    assert default.message.endswith("is the default value; remove it")
    assert next(d for d in report.warnings if d.code == "shorter-form").message.endswith("it means the same")
    assert [d.code for d in report.diagnostics if d.severity is Severity.INFO] == ["ignored-file"]
    # The catalogue's load stays quiet about style.
    assert load_package(FIXTURES / "advice" / "advice", source="community").diagnostics == []


def test_a_needs_cycle_inside_a_package_is_a_warning_naming_its_path(tmp_path: Path) -> None:
    root = tmp_path / "loop-probe"
    for name, waits in (("a", "needs: [loop-probe/b]"), ("b", "after: [loop-probe/c]"), ("c", "needs: [loop-probe/a]"),
                        ("d", "needs: [loop-probe/a]"), ("e", "")):
        folder = root / "runtimes" / name
        folder.mkdir(parents=True)
        (folder / "RUNTIME.md").write_text(f"---\nschedule:\n  stage: post-turn\n  {waits}\nfunction: {{}}\n---\nA step.\n")
        (folder / "handler.py").write_text("def handler(ctx):\n    return {}\n")
    (root / "PLUGIN.md").write_text("---\nversion: 0.1.0\ndescription: Runtimes that wait on each other.\n---\n")
    report = validate_package(root)
    assert report.ok, report.diagnostics
    [cycle] = [d for d in report.warnings if d.code == "dependency-cycle"]
    path = cycle.message.split("): ", 1)[1].split("; ")[0].split(" → ")
    assert path[0] == path[-1] and sorted(path[1:]) == ["loop-probe/a", "loop-probe/b", "loop-probe/c"], cycle.message
    out = io.StringIO()
    assert run([str(root)], out=out) == 0 and "dependency-cycle" in out.getvalue()


def test_journal_compiles_datasets_action_kinds_and_locales() -> None:
    package = load_package(FIXTURES / "good" / "journal", source="community")
    assert package.state is PackageState.LOADED, [str(d) for d in package.diagnostics]
    contributes = package.definition["contributes"]
    assert contributes["datasets"] == {
        "journal": {
            "namespace": "journal",
            "schema": "schemas/journal.json",
            "ops": ["set", "merge", "delete"],
            "tools": ["get", "list", "upsert", "update"],
            "key": "id",
            "description": "Entries of the journal.",
        }
    }
    [kind] = contributes["actionKinds"]
    assert kind["kind"] == "journal/whisper" and kind["roles"] == ["player"] and kind["actor"] is True
    assert contributes["events"] == [{"topic": "journal.written", "description": "A journal entry was written."}]
    assert package.event_topics == ["journal.written"]
    assert (package.tools, package.actions, package.forms, package.extensions) == (
        ["summarize"],
        ["clear-journal"],
        ["journal-entry"],
        ["prompt.segment@1/journal"],
    )
    zh = package.definition["locales"]["zh"]
    assert zh["PLUGIN.md"]["displayName"] == "日志"
    assert zh["PLUGIN.md"]["author.links[0].label"] == "源码"
    assert zh["messages"] == {"No entries yet": "还没有日志"}
    write = next(runtime for runtime in package.runtimes if runtime.runtime_id == "journal/write")
    assert write.manifest["agent"]["tools"]["datasets"] == [{"dataset": "journal", "tools": ["get", "list", "upsert", "update"]}]
    assert write.manifest["datasets"]["journal"]["schema"] == "schemas/journal.json"
    recall = next(runtime for runtime in package.runtimes if runtime.runtime_id == "journal/recall")
    assert recall.manifest["agent"]["tools"]["datasets"] == [{"dataset": "journal", "tools": ["get", "list"]}]


def test_a_locale_file_names_list_items_by_their_identity() -> None:
    """Settings by key, commands by name, options by value (or position where an entry names none); the compiled
    map keys each translation by the manifest item's position (tests/fixtures/covel-shape)."""
    from shared.settings import REPO_ROOT

    package = load_package(REPO_ROOT / "tests" / "fixtures" / "covel-shape" / "covel-standing", source="community", strict=True)
    assert package.state is PackageState.LOADED and not package.diagnostics, [str(d) for d in package.diagnostics]
    zh = package.definition["locales"]["zh"]["PLUGIN.md"]
    assert zh["contributes.settings[0].label"] == "叙事人称" and zh["contributes.settings[1].label"] == "显示分数"
    assert zh["contributes.settings[0].options[0].label"] == "第一人称" and zh["contributes.settings[0].options[1].label"] == "第二人称"
    assert zh["contributes.commands[0].label"] == "推一把" and zh["contributes.commands[1].label"] == "遗忘"
    assert zh["contributes.commands[0].arguments[0].description"] == "推谁"


def test_a_runtime_md_or_plugin_md_names_its_package(tmp_path: Path) -> None:
    facts = FIXTURES / "good" / "facts"
    assert package_root_of(facts / "runtimes" / "extract" / "RUNTIME.md") == facts
    assert package_root_of(facts / "runtimes" / "extract") == facts
    assert package_root_of(facts / "PLUGIN.md") == facts
    (tmp_path / "RUNTIME.md").write_text("---\n---\n")
    with pytest.raises(NotAPackage):
        package_root_of(tmp_path / "RUNTIME.md")
    with pytest.raises(NotAPackage):
        package_root_of(tmp_path / "missing")


# ----- the command ------------------------------------------------------------------------------


def _run(*paths: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return run(list(paths), out, err), out.getvalue(), err.getvalue()


def test_cli_passes_on_builtin_plugins() -> None:
    code, out, _ = _run(*[str(path) for path in sorted(BUILTIN_DIR.iterdir()) if path.is_dir()])
    assert code == 0
    assert "✓ narrator" in out and "warning" not in out
    assert "languages: text en, zh; instructions en, zh" in out


def test_cli_reports_errors_per_package_and_exits_1() -> None:
    code, out, _ = _run(str(FIXTURES / "good" / "facts"), str(FIXTURES / "dataset-key-unknown" / "dataset-key-unknown" / "PLUGIN.md"))
    assert code == 1
    assert "✓ facts" in out and "✗ dataset-key-unknown" in out
    assert (
        "  error: PLUGIN.md:contributes.datasets.journal.key: dataset-key-unknown key `slug` is not a top-level property "
        "of schemas/journal.json (one of: id, text)"
    ) in out
    assert out.strip().endswith("1 of 2 package(s) valid")


def test_cli_runtime_md_and_same_package_twice_report_once() -> None:
    facts = FIXTURES / "good" / "facts"
    code, out, _ = _run(str(facts / "runtimes" / "extract" / "RUNTIME.md"), str(facts))
    assert code == 0 and out.count("✓ facts") == 1 and "named as" in out


def test_cli_bad_usage_exits_2() -> None:
    code, _, err = _run("/definitely/not/here")
    assert code == 2 and "no such file" in err
    with pytest.raises(SystemExit) as raised:
        build_parser().parse_args(["validate-plugin"])
    assert raised.value.code == 2


def test_cli_subcommand_is_wired() -> None:
    from covel_cli.main import main

    assert main(["validate-plugin", str(BUILTIN_DIR / "narrator")]) == 0
    assert main(["validate-plugin", str(FIXTURES / "unknown-top-level" / "unknown-top-level")]) == 1


# ----- property: mutated manifests never crash the loader ---------------------------------------

SEEDS = [
    (BUILTIN_DIR / "narrator" / "PLUGIN.md").read_text(encoding="utf-8"),
    (FIXTURES / "good" / "journal" / "PLUGIN.md").read_text(encoding="utf-8"),
    (FIXTURES / "advice" / "advice" / "PLUGIN.md").read_text(encoding="utf-8"),
]
FRAGMENTS = [
    "---", "---js", ":", "- ", "  ", "\n", "{", "}", "[", "]", "~", "&a", "*a", "!!python/object:os.system", "null",
    "runtime:", "schedule:", "stage: narrative", "io:", "visibility: story", "contributes:", "datasets:",
    "schema: ../x.json", "tools:", "- 7", "true", "0", "-1", "\ufeff", "\t", "'", '"', "#", "?", "|", ">", "%",
    "@", "`", "\u0000", "é", "日志", "inputs:", "from: {kernel: x}", "select: a~", "actionKinds:", "- name: say",
]


@st.composite
def mutated(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(SEEDS))
    for _ in range(draw(st.integers(min_value=1, max_value=6))):
        operation = draw(st.sampled_from(["insert", "delete", "replace", "duplicate-line", "swap-lines"]))
        position = draw(st.integers(min_value=0, max_value=max(len(text) - 1, 0)))
        if operation == "insert":
            piece = draw(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=8)))
            text = text[:position] + piece + text[position:]
        elif operation == "delete":
            text = text[:position] + text[position + draw(st.integers(min_value=1, max_value=20)) :]
        elif operation == "replace":
            text = text[:position] + draw(st.sampled_from(FRAGMENTS)) + text[position + 1 :]
        else:
            lines = text.split("\n")
            index = draw(st.integers(min_value=0, max_value=len(lines) - 1))
            other = draw(st.integers(min_value=0, max_value=len(lines) - 1))
            if operation == "duplicate-line":
                lines.insert(other, lines[index])
            else:
                lines[index], lines[other] = lines[other], lines[index]
            text = "\n".join(lines)
    return text


@pytest.fixture(scope="module")
def mutation_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("mutations") / "journal"
    shutil.copytree(FIXTURES / "good" / "journal", root)
    return root


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=mutated(), strict=st.booleans())
def test_mutated_plugin_md_gives_diagnostics_never_a_crash(mutation_root: Path, text: str, strict: bool) -> None:
    (mutation_root / "PLUGIN.md").write_text(text, encoding="utf-8", errors="surrogatepass")
    package = load_package(mutation_root, source="community", strict=strict)
    assert package.state in (PackageState.LOADED, PackageState.FAILED)
    if package.state is PackageState.FAILED:
        assert any(d.is_error and d.code and d.message for d in package.diagnostics)
    for diagnostic in package.diagnostics:
        assert isinstance(diagnostic.field_path, str) and isinstance(diagnostic.file, str)


def test_every_diagnostic_code_is_in_the_table_and_every_entry_is_used() -> None:
    import ast
    import re

    from services.registry.diagnostic_codes import CODES

    code_like = re.compile(r"[a-z]+(-[a-z0-9]+)+")
    emitted: set[str] = set()
    repo = Path(__file__).parents[2]
    # The entry probe's codes are defined in shared/, where the hooks service reads them too.
    sources = [*sorted((repo / "services" / "registry").glob("*.py")), repo / "shared" / "plugin_code" / "declarations.py"]
    for path in sources:
        if path.name == "diagnostic_codes.py":
            continue
        text = path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "attr", None) or getattr(node.func, "id", None)
                if name in {"error", "warning", "info", "drop", "add", "PydanticCustomError"}:
                    emitted.update(
                        arg.value for arg in node.args[:2] if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and code_like.fullmatch(arg.value)
                    )
                emitted.update(kw.value.value for kw in node.keywords if kw.arg == "code" and isinstance(kw.value, ast.Constant))
            if isinstance(node, ast.Tuple) and len(node.elts) in (2, 3) and isinstance(node.elts[0], ast.Constant):
                value = node.elts[0].value
                # (code, message[, hint]) and (code, path, message) tuples: a message is text with spaces.
                is_message = any(
                    isinstance(item, (ast.JoinedStr, ast.BinOp)) or (isinstance(item, ast.Constant) and " " in str(item.value))
                    for item in node.elts[1:]
                )
                if isinstance(value, str) and code_like.fullmatch(value) and is_message:
                    emitted.add(value)
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                if any(isinstance(target, ast.Name) and target.id.endswith("_CODE") for target in node.targets):
                    emitted.add(node.value.value)
    emitted |= {"unknown-key", "missing-field", "invalid-type", "invalid-value"}  # mapped from pydantic errors
    emitted |= {f"duplicate-{what}" for what in ("tool", "action", "form", "event-topic", "prompt-id")}
    assert emitted - set(CODES) == set(), "codes given but not documented"
    assert set(CODES) - emitted == set(), "documented codes nothing gives"

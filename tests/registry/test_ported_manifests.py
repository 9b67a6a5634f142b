"""Covel packages ported with only their code rewritten: .js code paths, content-only zh segments,
{value, label} select options and explicit derived values pass validation (issue 16, item 6)."""

from __future__ import annotations

import io

from covel_cli.validate_plugin import run
from services.registry.diagnostics import Severity
from services.registry.loaded_package import PackageState
from services.registry.package_loader import load_package
from services.registry.package_validator import validate_package
from shared.plugin_settings import value_problem
from tests.registry.conftest import FIXTURES

PORTED = FIXTURES / "ported"


def _where(report, severity: Severity) -> list[tuple[str, str, str]]:
    return [(d.code, d.file, d.field_path) for d in report.diagnostics if d.severity is severity]


def test_a_ported_package_validates_with_warnings_and_notes_only() -> None:
    report = validate_package(PORTED / "ported-story")
    assert report.ok, [str(d) for d in report.diagnostics]
    assert _where(report, Severity.WARNING) == [
        ("wires-unsupported", "PLUGIN.md", "contributes.wires"),
        ("world-projections-unsupported", "PLUGIN.md", "contributes.worldProjections"),
        ("derived-value", "PLUGIN.md", "tags[1]"),
        ("derived-value", "PLUGIN.md", "id"),
        ("default-value", "PLUGIN.md", "kind"),
        ("derived-value", "PLUGIN.md", "entry"),
        ("derived-value", "runtimes/tally/RUNTIME.md", "type"),
        ("derived-value", "runtimes/tally/RUNTIME.md", "function.handler"),
    ]
    assert _where(report, Severity.INFO) == [
        ("code-path-python", "PLUGIN.md", "entry"),
        ("code-path-python", "runtimes/tally/RUNTIME.md", "function.handler"),
        ("code-path-python", "runtimes/tally/RUNTIME.md", "guard"),
        ("code-path-python", "PLUGIN.md", "contributes.worldProjections[0].handler"),
    ]


def test_js_code_paths_load_the_python_module_of_the_same_stem() -> None:
    package = load_package(PORTED / "ported-story", source="community")
    assert package.state is PackageState.LOADED, [str(d) for d in package.diagnostics]
    assert package.entry == "server/index.py"
    tally = next(runtime for runtime in package.runtimes if runtime.runtime_id == "ported-story/tally")
    assert tally.type == "function"
    assert tally.manifest["function"]["handler"] == "runtimes/tally/handler.py"
    assert tally.manifest["guard"] == "runtimes/tally/guard.py"


def test_a_zh_variant_may_translate_segments_by_position_with_empty_frontmatter() -> None:
    package = load_package(PORTED / "ported-story", source="community")
    assert package.prompt_segment_variants == {"zh": {"rules": "故事要短。"}}
    teller = next(runtime for runtime in package.runtimes if runtime.runtime_id == "ported-story/teller")
    assert teller.prompt_variants == {"zh": "用一句话告诉玩家天气的感觉。"}


def test_select_options_may_be_value_label_objects() -> None:
    declaration = {"key": "tone", "type": "select", "options": [{"value": "calm", "label": "Calm"}, {"value": "grim", "label": "Grim"}]}
    assert value_problem(declaration, "grim") == ""
    assert value_problem(declaration, "loud").startswith("must be one of calm, grim, not 'loud'")
    assert value_problem(declaration, {"value": "calm", "label": "Calm"}) != "", "the player picks a value, not the option object"


def test_a_written_type_that_contradicts_the_runtime_is_an_error() -> None:
    report = validate_package(PORTED / "type-mismatch")
    assert _where(report, Severity.ERROR) == [("runtime-type-mismatch", "runtimes/count/RUNTIME.md", "type")]


def test_every_projection_handler_must_be_in_the_package() -> None:
    report = validate_package(PORTED / "projection-missing")
    assert _where(report, Severity.ERROR) == [("file-missing", "PLUGIN.md", "contributes.worldProjections[1].handler")]
    assert _where(report, Severity.INFO) == [("code-path-python", "PLUGIN.md", "contributes.worldProjections[0].handler")]


def test_a_suggestion_never_names_the_refused_key() -> None:
    report = validate_package(PORTED / "segment-description")
    [refused] = report.diagnostics
    assert (refused.code, refused.field_path) == ("unknown-key", "contributes.prompt[0].description")
    assert "did you mean" not in refused.hint and "another part of the manifest" in refused.hint


def test_covel_validate_plugin_passes_the_ported_package() -> None:
    out = io.StringIO()
    assert run([str(PORTED / "ported-story")], out=out, err=io.StringIO()) == 0
    assert "✓ ported-story" in out.getvalue() and "`./handler.js` loads runtimes/tally/handler.py" in out.getvalue()


# -- what the entry registers, against contributes (a probe process runs register(covel)) --


def test_an_entry_that_registers_other_than_it_declares_fails_validation() -> None:
    report = validate_package(PORTED / "shout-declared", probe=True)
    [mismatch] = report.diagnostics
    assert (mismatch.code, mismatch.file, mismatch.field_path) == ("entry-registrations", "server/index.py", "contributes")
    assert "contributes.tools declares shout but server code registers no tool" in mismatch.message
    assert "covel.register_tool('yell') is registered but yell is missing from contributes.tools" in mismatch.message
    out = io.StringIO()
    assert run([str(PORTED / "shout-declared")], out=out, err=io.StringIO(), probe=True) == 1
    assert "✗ shout-declared" in out.getvalue()


def test_validation_runs_no_plugin_code_unless_asked_to_probe() -> None:
    """Static by default: the entry's register(covel) is not run, so its mismatch is not found."""
    report = validate_package(PORTED / "shout-declared")
    assert report.ok and not [d for d in report.diagnostics if d.code in ("entry-registrations", "entry-load-failed")]
    out = io.StringIO()
    assert run([str(PORTED / "shout-declared")], out=out, err=io.StringIO()) == 0
    assert "✓ shout-declared" in out.getvalue()


def test_a_register_that_never_returns_fails_only_its_package() -> None:
    from services.registry.entry_registrations import check_entry_registrations

    hangs = load_package(PORTED / "register-hangs", source="community")
    story = load_package(PORTED / "ported-story", source="community")
    # The limit counts the start of the fresh probe the story gets: 2 s was too short for that at load 9.
    check_entry_registrations([hangs, story], timeout_s=5)
    assert hangs.state is PackageState.FAILED and story.state is PackageState.LOADED
    [overrun] = [d for d in hangs.diagnostics if d.is_error]
    assert overrun.code == "entry-load-failed" and "did not return within 5 s" in overrun.message


async def test_the_registry_lists_a_mismatched_entry_as_a_load_failure(registry_for, tmp_path) -> None:
    import shutil

    from covel.common.v1 import common_pb2
    from covel.registry.v1 import registry_pb2

    for name in ("shout-declared", "ported-story"):
        shutil.copytree(PORTED / name, tmp_path / name)
    # The operator's own folder: the registry probes its packages' entries (a community package's code runs only
    # once a session approved it, in the hooks service, which checks it then).
    client = await registry_for([tmp_path], builtin_dirs=[tmp_path])
    reply = await client.stub.GetPlugins(registry_pb2.GetPluginsRequest(plugin_ids=["shout-declared", "ported-story"]), timeout=5)
    shout, story = reply.plugins
    assert shout.state == registry_pb2.PLUGIN_STATE_FAILED
    errors = [(d.code, d.file) for d in shout.diagnostics if d.severity == common_pb2.SEVERITY_ERROR]
    assert errors == [("entry-registrations", "server/index.py")]
    assert story.state == registry_pb2.PLUGIN_STATE_LOADED and story.entry == "server/index.py"


async def test_the_registry_runs_no_community_entry_code(registry_for, tmp_path) -> None:
    import shutil

    from covel.registry.v1 import registry_pb2

    shutil.copytree(PORTED / "shout-declared", tmp_path / "shout-declared")
    client = await registry_for([tmp_path])
    [shout] = (await client.stub.GetPlugins(registry_pb2.GetPluginsRequest(plugin_ids=["shout-declared"]), timeout=5)).plugins
    assert shout.source == "community" and shout.state == registry_pb2.PLUGIN_STATE_LOADED
    assert not [d for d in shout.diagnostics if d.code in ("entry-registrations", "entry-load-failed")]


def test_packages_whose_import_hangs_hold_up_one_lane_each_not_the_start(tmp_path) -> None:
    """Three packages whose register(covel) waits forever (on a lock, the network...), among others: the probes run
    side by side, so the whole takes about one time-out, not three one after another."""
    import shutil
    import time

    from services.registry.entry_registrations import check_entry_registrations

    packages = []
    for index in range(3):
        copy = tmp_path / f"register-hangs-{index}"
        shutil.copytree(PORTED / "register-hangs", copy)  # its id is its folder's name
        (copy / "server" / "index.py").write_text("import time\n\n\ndef register(covel):\n    time.sleep(3600)\n")
        packages.append(load_package(copy, source="community"))
    story = load_package(PORTED / "ported-story", source="community")
    started = time.monotonic()
    check_entry_registrations([*packages, story], timeout_s=6)
    elapsed = time.monotonic() - started
    assert [p.state for p in packages] == [PackageState.FAILED] * 3 and story.state is PackageState.LOADED
    # One after another it took 3 x 6 s and more; side by side 6 s plus the probes' starts (a loaded machine's margin).
    assert elapsed < 16, elapsed

"""Loading entry modules: register(covel), and contributes.hooks agreeing with covel.on both ways."""

from __future__ import annotations

from pathlib import Path

from services.hooks.entry_loader import PluginEntry, load_entries


def write_plugin(root: Path, plugin_id: str, code: str) -> Path:
    package = root / plugin_id
    (package / "server").mkdir(parents=True)
    (package / "server" / "index.py").write_text(code)
    return package


def entry(package: Path, hooks: tuple[tuple[str, str], ...]) -> PluginEntry:
    return PluginEntry(package.name, package, "server/index.py", hooks, "builtin")


def test_loads_handlers_and_lib_imports(tmp_path: Path) -> None:
    package = write_plugin(tmp_path, "with-lib", "from ..lib.rules import limit\n\ndef register(covel):\n    covel.on('TurnStart', lambda c, p: None, timeout_ms=limit())\n")
    (package / "lib").mkdir()
    (package / "lib" / "rules.py").write_text("def limit():\n    return 1234\n")
    result = load_entries([entry(package, (("TurnStart", "normal"),))], generation=1)
    assert result.errors == {}
    assert result.loaded[0].registrar.hooks[0].timeout_ms == 1234


def test_declared_but_not_registered_fails_naming_the_event(tmp_path: Path) -> None:
    package = write_plugin(tmp_path, "half", "def register(covel):\n    covel.on('TurnStart', lambda c, p: None)\n")
    result = load_entries([entry(package, (("TurnStart", "normal"), ("PreToolUse", "normal")))], generation=1)
    assert "PreToolUse" in result.errors["half"] and "no handler" in result.errors["half"]


def test_registered_but_not_declared_fails_naming_the_event(tmp_path: Path) -> None:
    package = write_plugin(tmp_path, "extra", "def register(covel):\n    covel.on('TurnStop', lambda c, p: None)\n")
    result = load_entries([entry(package, ())], generation=1)
    assert "TurnStop" in result.errors["extra"] and "missing from contributes.hooks" in result.errors["extra"]


def test_enforce_group_must_match(tmp_path: Path) -> None:
    package = write_plugin(tmp_path, "grouped", "def register(covel):\n    covel.on('TurnStop', lambda c, p: None, enforce='post')\n")
    result = load_entries([entry(package, (("TurnStop", "normal"),))], generation=1)
    assert "enforce" in result.errors["grouped"]


def test_a_broken_plugin_fails_alone(tmp_path: Path) -> None:
    broken = write_plugin(tmp_path, "broken", "raise RuntimeError('bad import')\n")
    good = write_plugin(tmp_path, "good", "def register(covel):\n    covel.on('TurnStart', lambda c, p: None)\n")
    unknown = write_plugin(tmp_path, "unknown-event", "def register(covel):\n    covel.on('TurnBegin', lambda c, p: None)\n")
    result = load_entries(
        [entry(broken, ()), entry(good, (("TurnStart", "normal"),)), entry(unknown, ())], generation=1
    )
    assert "bad import" in result.errors["broken"]
    assert "TurnBegin" in result.errors["unknown-event"]
    assert [loaded.entry.plugin_id for loaded in result.loaded] == ["good"]

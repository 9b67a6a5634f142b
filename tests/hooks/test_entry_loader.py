"""Loading entry modules: register(covel), and contributes.hooks agreeing with covel.on both ways."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.hooks.in_process import load_entries
from services.hooks.plugin_entries import PluginEntry


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


# ----- tools, actions, services, extensions, forms: contributes versus registrations ------------

FULL = """
def register(covel):
    covel.register_tool("save-facts", lambda ctx, args: {"ok": True})
    covel.register_rpc("recompute", lambda ctx, request: {"done": True})
    covel.register_service("facts.lookup@1", lambda ctx, request: [])
    covel.provide_extension("prompt.segment@1", "facts", lambda ctx: "facts")
    covel.register_form_validator("fact-form", lambda ctx, values: None)
"""


def declared(package: Path, **lists: tuple[str, ...]) -> PluginEntry:
    fields = {f"declared_{name}": value for name, value in lists.items()}
    return PluginEntry(package.name, package, "server/index.py", (), "community", **fields)


ALL_DECLARED = {
    "tools": ("save-facts",),
    "actions": ("recompute",),
    "services": ("facts.lookup@1",),
    "extensions": ("prompt.segment@1/facts",),
    "forms": ("fact-form",),
}


def test_every_kind_of_registration_agrees_with_contributes(tmp_path: Path) -> None:
    package = write_plugin(tmp_path, "full", FULL)
    result = load_entries([declared(package, **ALL_DECLARED)], generation=1)
    assert result.errors == {}
    registrar = result.loaded[0].registrar
    assert [extension.key for extension in registrar.extensions] == ["prompt.segment@1/facts"]
    assert [rpc.action for rpc in registrar.rpcs] == ["recompute"]


@pytest.mark.parametrize(
    ("field", "name", "call"),
    [
        ("tools", "save-facts", "covel.register_tool"),
        ("actions", "recompute", "covel.register_rpc"),
        ("services", "facts.lookup@1", "covel.register_service"),
        ("extensions", "prompt.segment@1/facts", "covel.provide_extension"),
        ("forms", "fact-form", "covel.register_form_validator"),
    ],
)
def test_registered_but_not_declared_names_the_missing_declaration(tmp_path: Path, field: str, name: str, call: str) -> None:
    package = write_plugin(tmp_path, "over", FULL)
    lists = {key: value for key, value in ALL_DECLARED.items() if key != field}
    result = load_entries([declared(package, **lists)], generation=1)
    assert result.errors["over"] == f"{call}({name!r}) is registered but {name} is missing from contributes.{field}"
    assert result.loaded == []


@pytest.mark.parametrize("field", sorted(ALL_DECLARED))
def test_declared_but_not_registered_names_the_missing_registration(tmp_path: Path, field: str) -> None:
    package = write_plugin(tmp_path, "under", FULL)
    lists = dict(ALL_DECLARED)
    lists[field] = (*lists[field], "extra-one")
    result = load_entries([declared(package, **lists)], generation=1)
    error = result.errors["under"]
    assert error.startswith(f"contributes.{field} declares extra-one but server code registers no ")


def test_declarations_without_an_entry_module_fail(tmp_path: Path) -> None:
    plugin = PluginEntry("no-code", tmp_path, "", (), "community", declared_tools=("save",), declared_forms=("f",))
    result = load_entries([plugin], generation=1)
    assert result.errors["no-code"] == (
        "contributes.tools declares save but the plugin has no entry module; "
        "contributes.forms declares f but the plugin has no entry module"
    )


def test_a_mismatch_fails_that_plugin_only(tmp_path: Path) -> None:
    bad = write_plugin(tmp_path, "bad", FULL)
    good = write_plugin(tmp_path, "fine", FULL)
    result = load_entries([declared(bad, tools=("save-facts",)), declared(good, **ALL_DECLARED)], generation=1)
    assert set(result.errors) == {"bad"} and [loaded.entry.plugin_id for loaded in result.loaded] == ["fine"]


@pytest.mark.parametrize(
    "code",
    [
        "covel.register_rpc('covel:approve', lambda c, r: None)",
        "covel.register_rpc('', lambda c, r: None)",
        "covel.register_service('no-version', object())",
        "covel.register_service('x@1', object(), access='admin')",
        "covel.provide_extension('prompt.segment@1', 'a/b', lambda c: None)",
        "covel.register_form_validator('f', 'not callable')",
        "covel.register_tool('t', lambda c, a: None); covel.register_tool('t', lambda c, a: None)",
    ],
)
def test_registrar_rejects_calls_that_can_never_work(tmp_path: Path, code: str) -> None:
    package = write_plugin(tmp_path, "wrong", f"def register(covel):\n    {code}\n")
    result = load_entries([declared(package)], generation=1)
    assert "RegistrationError" in result.errors["wrong"]


def test_catalogue_sync_carries_the_declared_lists_from_the_registry_reply(tmp_path) -> None:
    from covel.registry.v1 import registry_pb2
    from services.hooks.catalogue_sync import _entries
    from services.registry.package_loader import load_package
    from services.registry.proto_mapping import package_to_proto
    from tests.registry.conftest import write_plugin

    # A loaded package's definition is the registry's compiled one (the sync reads it typed).
    compiled = package_to_proto(load_package(write_plugin(tmp_path, "facts", "version: 0.1.0"), source="community"))
    reply = registry_pb2.ListPluginsResponse(
        plugins=[
            registry_pb2.PluginPackage(
                id="facts",
                definition=compiled.definition,
                root_dir="/x/facts",
                entry="server/index.py",
                state=registry_pb2.PLUGIN_STATE_LOADED,
                source="community",
                tools=["save-facts"],
                actions=["recompute"],
                services=["facts.lookup@1"],
                extensions=["prompt.segment@1/facts"],
                forms=["fact-form"],
            )
        ]
    )
    [entry_] = _entries(reply)
    assert entry_.declared_registrations() == [(field, ALL_DECLARED[field]) for field in ("tools", "actions", "services", "extensions", "forms")]


# -- shared/plugin_code: one loader for entry modules, function handlers and guards --


def _lib_package(root: Path, plugin_id: str, word: str) -> Path:
    package = root / plugin_id
    for folder in ("lib", "runtimes/speak", "server"):
        (package / folder).mkdir(parents=True)
    (package / "lib" / "voice.py").write_text(f"WORD = {word!r}\n")
    (package / "runtimes" / "speak" / "handler.py").write_text("from ...lib.voice import WORD\n\nasync def handler(ctx):\n    return WORD\n")
    (package / "runtimes" / "speak" / "guard.py").write_text("from ...lib import voice\n\nasync def guard(ctx):\n    return voice.WORD\n")
    (package / "server" / "index.py").write_text("from ..lib.voice import WORD\n\ndef register(covel):\n    return WORD\n")
    return package


def test_handler_guard_and_entry_import_their_own_packages_lib(tmp_path: Path) -> None:
    from shared.plugin_code import PluginFile, load_callable

    first, second = _lib_package(tmp_path, "first", "one"), _lib_package(tmp_path, "second", "two")
    for package, word in ((first, "one"), (second, "two")):
        handler = load_callable(PluginFile(package.name, package, "runtimes/speak/handler.py"), "handler")
        guard = load_callable(PluginFile(package.name, package, "runtimes/speak/guard.py"), "guard")
        register = load_callable(PluginFile(package.name, package, "server/index.py"), "register")
        assert handler.__globals__["WORD"] == guard.__globals__["voice"].WORD == register(None) == word, "no lib/ collides"


def test_an_edited_lib_file_is_imported_afresh(tmp_path: Path) -> None:
    import os

    from shared.plugin_code import PluginFile, load_callable

    package = _lib_package(tmp_path, "edited", "before")
    file = PluginFile("edited", package, "runtimes/speak/handler.py")
    assert load_callable(file, "handler").__globals__["WORD"] == "before"
    assert load_callable(file, "handler") is load_callable(file, "handler"), "unchanged files are imported once"
    lib = package / "lib" / "voice.py"
    lib.write_text("WORD = 'after!'\n")
    os.utime(lib, ns=(lib.stat().st_atime_ns, lib.stat().st_mtime_ns + 1_000_000))
    assert load_callable(file, "handler").__globals__["WORD"] == "after!"


def test_loads_of_one_epoch_check_the_files_once(tmp_path: Path) -> None:
    """A turn (the scheduler's epoch) runs one version of its plugin's code; the next turn sees the edit.
    Without this, every load stat'ed every file its namespace imported: N² stats for N handlers."""
    import os

    from shared.plugin_code import PluginFile, load_callable

    package = _lib_package(tmp_path, "epochs", "before")
    file = PluginFile("epochs", package, "runtimes/speak/handler.py")
    first = load_callable(file, "handler", epoch="turn-1")
    lib = package / "lib" / "voice.py"
    lib.write_text("WORD = 'after!'\n")
    os.utime(lib, ns=(lib.stat().st_atime_ns, lib.stat().st_mtime_ns + 1_000_000))
    assert load_callable(file, "handler", epoch="turn-1") is first, "checked once in its epoch"
    assert load_callable(file, "handler", epoch="turn-2").__globals__["WORD"] == "after!"
    assert load_callable(file, "handler").__globals__["WORD"] == "after!", "no epoch: checked on every load"


def test_an_epoch_stays_checked_while_another_interleaves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Turns of two sessions load the same plugin in turn: each epoch is checked once, not at every switch."""
    from shared.plugin_code import PluginFile, loader

    package = _lib_package(tmp_path, "interleaved", "same")
    file = PluginFile("interleaved", package, "runtimes/speak/handler.py")
    loader.load_callable(file, "handler", epoch="a")
    checks = []
    original = loader._Namespace.is_current

    def counted(namespace: loader._Namespace) -> bool:
        checks.append(namespace.name)
        return original(namespace)

    monkeypatch.setattr(loader._Namespace, "is_current", counted)
    handlers = {loader.load_callable(file, "handler", epoch=epoch) for epoch in ("a", "b", "a", "b", "c")}
    assert len(handlers) == 1 and len(checks) == 2, "b and c once each; a was checked when it first loaded"


def test_a_handler_loaded_in_this_epoch_is_found_without_an_import(tmp_path: Path) -> None:
    """What a sandbox worker finds on its loop (no thread hop): only a module already imported and checked
    in this epoch, and never while an import holds the loader."""
    import threading

    from shared.plugin_code import PluginFile, load_callable, loaded_callable, loader

    package = _lib_package(tmp_path, "found", "here")
    file = PluginFile("found", package, "runtimes/speak/handler.py")
    assert loaded_callable(file, "handler", epoch="turn-1") is None, "never imported"
    handler = load_callable(file, "handler", epoch="turn-1")
    assert loaded_callable(file, "handler", epoch="turn-1") is handler
    assert loaded_callable(file, "handler", epoch="turn-2") is None, "not checked in this epoch yet"
    assert loaded_callable(file, "guard", epoch="turn-1") is None, "no such function: load_callable says why"
    assert loaded_callable(PluginFile("found", package, "runtimes/speak/guard.py"), "guard", epoch="turn-1") is None
    importing, done = threading.Event(), threading.Event()

    def hold_the_loader() -> None:
        with loader._lock:
            importing.set()
            done.wait(5)

    holder = threading.Thread(target=hold_the_loader)
    holder.start()
    importing.wait(5)
    try:
        assert loaded_callable(file, "handler", epoch="turn-1") is None, "an import in progress: no waiting on the loop"
    finally:
        done.set()
        holder.join()


def test_a_module_without_the_function_is_an_import_error(tmp_path: Path) -> None:
    from shared.plugin_code import PluginFile, load_callable

    package = _lib_package(tmp_path, "no-guard", "x")
    with pytest.raises(ImportError, match=r"handler.py defines no guard"):
        load_callable(PluginFile("no-guard", package, "runtimes/speak/handler.py"), "guard")

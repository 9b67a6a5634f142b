"""Import plugin code inside a package namespace per plugin.

A plugin's folder is imported as the package `covel_plugin_<id>_<n>`, so its modules import
each other package-relatively: `from ..lib.dice import roll` in `server/index.py`,
`from ...lib.dice import roll` in `runtimes/<id>/handler.py` or `guard.py` (the spec keeps shared
code in `lib/`). Two plugins' modules never collide, and nothing is added to sys.path.

A namespace remembers the version (mtime_ns, size) of every file imported into it. When one of
them changes, the next load starts a new namespace (`_<n+1>`), so an edited handler or lib file
is imported afresh (as is the whole plugin for a new `generation`) while modules of the old namespace stay valid for code already holding them.
Loads that name the same `epoch` (the scheduler's: the turn) check those files once: a turn runs one
version of its plugin's code, and a turn of N handlers stats N files, not N² (issue: scheduler_overhead).
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

PACKAGE_PREFIX = "covel_plugin_"
FD_PREFIX = "/proc/self/fd/"
# Epochs a namespace remembers as checked: more than the turns one process runs at once.
KEPT_EPOCHS = 64


@dataclass(frozen=True)
class PluginFile:
    """A module of a plugin package: the package folder and the module's package-relative path."""

    plugin_id: str
    root: Path
    relative: str

    @property
    def path(self) -> Path:
        return self.root / self.relative


@dataclass
class _Namespace:
    name: str
    root: Path
    # The caller's reload count (the hooks service: the catalogue generation); another starts afresh.
    generation: int | None = None
    # file -> (mtime_ns, size) of each module imported into this namespace, as imported.
    versions: dict[str, tuple[int, int]] = field(default_factory=dict)
    # Epochs whose first load here found every file unchanged, oldest first (turns of other sessions interleave).
    checked_epochs: dict[object, None] = field(default_factory=dict)

    def is_current(self) -> bool:
        return all(_version(file) == version for file, version in self.versions.items())

    def is_current_for(self, epoch: object) -> bool:
        """Whether no file changed, checked once per epoch (every time without one). Modules imported
        since the last load (lazily, inside plugin code) join the check first."""
        if epoch is not None and epoch in self.checked_epochs:
            return True
        self.record_imported()
        current = self.is_current()
        if current:
            self.checked(epoch)
        return current

    def checked(self, epoch: object) -> None:
        if epoch is None:
            return
        self.checked_epochs[epoch] = None
        if len(self.checked_epochs) > KEPT_EPOCHS:
            del self.checked_epochs[next(iter(self.checked_epochs))]

    def record_imported(self) -> None:
        prefix = self.name + "."
        for name in [name for name in sys.modules if name == self.name or name.startswith(prefix)]:
            file = getattr(sys.modules.get(name), "__file__", None)
            if file and file not in self.versions:
                self.versions[file] = _version(file)


_namespaces: dict[Path, _Namespace] = {}
_counter = 0
_lock = threading.RLock()


def _version(path: str | Path) -> tuple[int, int]:
    try:
        stat = os.stat(path)
    except OSError:
        return (-1, -1)
    return (stat.st_mtime_ns, stat.st_size)


def _new_namespace(plugin_id: str, root: Path, generation: int | None) -> _Namespace:
    global _counter
    _counter += 1
    suffix = f"g{generation}" if generation is not None else str(_counter)
    name = f"{PACKAGE_PREFIX}{re.sub(r'[^0-9a-zA-Z_]', '_', plugin_id)}_{suffix}"
    # A name used before (same plugin and generation, another folder) starts empty: modules of the old
    # namespace stay with whoever holds them, but are never handed out again.
    for stale in [key for key in sys.modules if key == name or key.startswith(name + ".")]:
        del sys.modules[stale]
    init = root / "__init__.py"
    spec = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[str(root)])
    assert spec is not None and spec.loader is not None
    package = importlib.util.module_from_spec(spec)
    sys.modules[name] = package
    if init.is_file():
        spec.loader.exec_module(package)
    return _Namespace(name, root, generation)


def _resolved(root: Path) -> Path:
    # A sandbox worker reaches its plugin folder as /proc/self/fd/N (shared/sandbox/isolation.py):
    # resolving that would name a path the worker may not walk.
    return root if str(root).startswith(FD_PREFIX) else root.resolve()


def _namespace(plugin_id: str, root: Path, generation: int | None, epoch: object) -> _Namespace:
    resolved = _resolved(root)
    namespace = _namespaces.get(resolved)
    if namespace is None or namespace.generation != generation or not namespace.is_current_for(epoch):
        namespace = _namespaces[resolved] = _new_namespace(plugin_id, resolved, generation)
        # What this epoch imports from now on is recorded as imported: nothing older to check.
        namespace.checked(epoch)
    return namespace


def _identifier(part: str) -> str:
    return re.sub(r"\W", "_", part)


def _module_name(namespace: _Namespace, relative: str) -> str:
    *folders, file_name = Path(relative).with_suffix("").parts
    return ".".join([namespace.name, *map(_identifier, folders), _identifier(file_name)])


def _ensure_package(name: str, folder: Path) -> None:
    """A folder of the plugin as a package of its namespace, so siblings import relatively."""
    if name not in sys.modules:
        package = ModuleType(name)
        package.__path__ = [str(folder)]
        package.__package__ = name
        sys.modules[name] = package


def _import_file(namespace: _Namespace, relative: str) -> ModuleType:
    folders = Path(relative).parts[:-1]
    package = namespace.name
    folder = namespace.root
    for part in folders:
        package, folder = f"{package}.{_identifier(part)}", folder / part
        _ensure_package(package, folder)
    name = _module_name(namespace, relative)
    module = sys.modules.get(name)
    if module is not None:
        return module
    spec = importlib.util.spec_from_file_location(name, namespace.root / relative)
    if spec is None or spec.loader is None:
        raise ImportError(f"{relative} is not a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    finally:
        # What it imported, at the versions imported (a module already there imported nothing new).
        namespace.record_imported()
    return module


def load_module(file: PluginFile, *, generation: int | None = None, epoch: object = None) -> ModuleType:
    """The module at `file`, imported once per version of the files its namespace imported.
    A `generation` other than the last one starts a new namespace, `covel_plugin_<id>_g<generation>`
    (a reload of the whole plugin). Loads with the same `epoch` (not None) check the files once."""
    if not file.path.is_file():
        raise ImportError(f"{file.relative} does not exist in plugin {file.plugin_id}")
    with _lock:
        namespace = _namespace(file.plugin_id, file.root, generation, epoch)
        return _import_file(namespace, file.relative)


def load_callable(file: PluginFile, name: str, *, epoch: object = None) -> Callable[..., Any]:
    """The module's `name` function (`handler`, `guard`, `register`); `epoch` as in load_module."""
    module = load_module(file, epoch=epoch)
    found = getattr(module, name, None)
    if not callable(found):
        raise ImportError(f"{file.relative} defines no {name}(…) function")
    return found


def loaded_callable(file: PluginFile, name: str, *, epoch: object) -> Callable[..., Any] | None:
    """load_callable's answer when it needs no import and no wait: the module is imported and its
    namespace checked in this epoch, and no import holds the loader. None otherwise (load_callable it
    in a plugin thread). A sandbox worker finds a handler this way on its loop, without a thread hop."""
    if epoch is None or not file.path.is_file() or not _lock.acquire(blocking=False):
        return None
    try:
        namespace = _namespaces.get(_resolved(file.root))
        if namespace is None or namespace.generation is not None or epoch not in namespace.checked_epochs:
            return None
        module = sys.modules.get(_module_name(namespace, file.relative))
    finally:
        _lock.release()
    found = getattr(module, name, None)
    return found if callable(found) else None

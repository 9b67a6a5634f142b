"""Validation results kept on disk, so a registry does not validate unchanged packages again.

Validating a package reads and checks all its files, and its entry module's registrations take a
probe process (services/registry/entry_registrations.py): seconds for the 89 packages of a checkout,
at every start of a registry. A `ValidationCache` keeps each result in a file of its folder
(COVEL_REGISTRY_CACHE_DIR, default `<data dir>/registry-cache`) under a key made of everything
the result depends on:

- the package: its resolved path, and every file and folder in it (relative name, mode, content hash);
- how it was loaded: its source (builtin or community) and strictness;
- the kernel: the covel version, the Python interpreter and import path (with the modification times of its
  folders, which installing or removing a library changes) and a hash of every file of the registry's and
  the shared library's code;
- for the probe's answers also the sandbox settings and PATH the probe runs with.

Any change to one of them is another key: that package is validated afresh, the others are
not. The checks across packages (contract schemas, duplicate ids, worlds) are not kept: they run
on every scan, on copies of the kept results. A package with a symbolic link or a special file,
or larger than MAX_PACKAGE_BYTES, is never kept (its content is not all in its folder, or hashing
it costs what validating does); nor is a probe answer the probe did not give (a time-out, a probe
that died). The files are pickles the registry itself wrote into its own data dir, as trusted as
the database beside them; an unreadable or stale one counts as missing.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import stat
import sys
import tempfile
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from shared.logs import get_logger

log = get_logger(component="validation_cache")

# Bumped when what is kept changes shape (the kernel hash covers code changes anyway).
FORMAT = 1
# A package folder with more bytes than this is validated every time rather than hashed.
MAX_PACKAGE_BYTES = 64 * 1024 * 1024
_CHUNK = 1 << 20
# The code a validation result depends on: the registry and the shared library (the probe, the SDK, shared models).
_CODE_ROOT = Path(__file__).resolve().parent.parent.parent
CODE_DIRS = (_CODE_ROOT / "services" / "registry", _CODE_ROOT / "shared")

T = TypeVar("T")


def _hash_file(path: str | Path, digest: Any) -> None:
    with open(path, "rb") as file:
        while chunk := file.read(_CHUNK):
            digest.update(chunk)


class _NotKept(Exception):
    """The folder holds what a hash of its files cannot stand for."""


def folder_digest(root: Path) -> str | None:
    """A hash of every file and folder under `root` (names, modes, contents); None when the folder
    cannot be kept (a symbolic link, a special file, an unreadable entry, or too many bytes)."""
    digest = hashlib.blake2b(digest_size=20)
    try:
        _digest_folder(os.fspath(root), "", digest, [0])
    except (OSError, ValueError, _NotKept):
        return None
    return digest.hexdigest()


def _digest_folder(folder: str, relative: str, digest: Any, total: list[int]) -> None:
    with os.scandir(folder) as scanned:
        entries = sorted(scanned, key=lambda entry: entry.name)
    for entry in entries:
        name = f"{relative}{entry.name}"
        info = entry.stat(follow_symlinks=False)
        if stat.S_ISDIR(info.st_mode):
            digest.update(f"d\0{name}\0{info.st_mode:o}\n".encode(errors="surrogateescape"))
            _digest_folder(entry.path, f"{name}/", digest, total)
        elif stat.S_ISREG(info.st_mode):
            total[0] += info.st_size
            if total[0] > MAX_PACKAGE_BYTES:
                raise _NotKept(name)
            digest.update(f"f\0{name}\0{info.st_mode:o}\0{info.st_size}\0".encode(errors="surrogateescape"))
            _hash_file(entry.path, digest)
            digest.update(b"\n")
        else:
            raise _NotKept(name)  # a symbolic link (its target may be anywhere) or a special file


def _code_digest(dirs: Iterable[Path]) -> str:
    digest = hashlib.blake2b(digest_size=20)
    for folder in dirs:
        for path in sorted(folder.rglob("*")):
            if "__pycache__" in path.parts or not path.is_file() or path.suffix in (".pyc", ".pyo"):
                continue
            digest.update(f"{path.relative_to(folder.parent).as_posix()}\0".encode(errors="surrogateescape"))
            _hash_file(path, digest)
            digest.update(b"\n")
    return digest.hexdigest()


def _import_path_state() -> list[tuple[str, int]]:
    """The import path, with each folder's modification time (installing or removing a library changes its folder's)."""
    state = []
    for entry in sys.path:
        try:
            state.append((entry, os.stat(entry or ".").st_mtime_ns))
        except OSError:
            state.append((entry, -1))
    return state


@cache
def kernel_fingerprint() -> str:
    """What every kept result depends on besides its package, once per process."""
    from services.registry.host_compatibility import host_version

    material = repr((FORMAT, host_version(), sys.version, sys.executable, _import_path_state(), _code_digest(CODE_DIRS)))
    return hashlib.blake2b(material.encode(errors="surrogateescape"), digest_size=20).hexdigest()


def _probe_environment() -> str:
    from shared.sandbox.settings import SandboxSettings

    return repr((sorted(SandboxSettings().model_dump(mode="json").items()), os.environ.get("PATH", "")))


class ValidationCache:
    """Validation results of packages, in `directory` (made when first written)."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        # Counted for the tests and the log: results found, and results made afresh.
        self.hits = 0
        self.misses = 0

    def _key(self, kind: str, root: Path, *parts: object) -> str | None:
        content = folder_digest(root)
        if content is None:
            return None
        material = repr((kind, kernel_fingerprint(), str(root.resolve()), content, *parts))
        return hashlib.blake2b(material.encode(errors="surrogateescape"), digest_size=24).hexdigest()

    def _path(self, kind: str, key: str) -> Path:
        return self.directory / kind / f"{key}.pickle"

    def _read(self, kind: str, key: str) -> Any | None:
        try:
            with self._path(kind, key).open("rb") as file:
                kept = pickle.load(file)
        except FileNotFoundError:
            return None
        except Exception as error:  # a torn or stale file is a miss; the fresh result replaces it
            log.warning("validation_cache.unreadable", file=str(self._path(kind, key)), error=repr(error))
            return None
        return kept[1] if isinstance(kept, tuple) and len(kept) == 2 and kept[0] == FORMAT else None

    def _write(self, kind: str, key: str, value: Any) -> None:
        """Best effort, atomically (a concurrent registry reads the old file or the new one, never half)."""
        target = self._path(kind, key)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
            try:
                with os.fdopen(fd, "wb") as file:
                    pickle.dump((FORMAT, value), file, protocol=pickle.HIGHEST_PROTOCOL)
                os.replace(temporary, target)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
                raise
        except Exception as error:  # a read-only or full disk costs the time saved, nothing else
            log.warning("validation_cache.unwritable", file=str(target), error=repr(error))

    def load(self, root: Path, source: str, strict: bool, validate: Callable[[], T]) -> T:
        """The package in `root` as `validate()` returns it, kept or made afresh (and then kept).
        A fresh copy every time: the scan's checks across packages change what they get."""
        key = self._key("packages", root, source, strict)
        if key is not None:
            kept = self._read("packages", key)
            if kept is not None:
                self.hits += 1
                return kept
        self.misses += 1
        value = validate()
        if key is not None:
            self._write("packages", key, value)
        return value

    def probe_answers(self, packages: list[Any], probe: Callable[[list[Any]], dict[str, Any]],
                      keep: Callable[[Any], bool]) -> dict[str, Any]:
        """The probe's answer for each package (by id): kept ones, and `probe(the others)` (kept when `keep(answer)`)."""
        environment = _probe_environment()
        answers: dict[str, Any] = {}
        keys: dict[str, str | None] = {}
        missing = []
        for package in packages:
            key = keys[package.id] = self._key("probes", package.root_dir, package.entry, environment)
            kept = self._read("probes", key) if key is not None else None
            if kept is None:
                missing.append(package)
            else:
                answers[package.id] = kept
        self.hits += len(packages) - len(missing)
        self.misses += len(missing)
        if missing:
            fresh = probe(missing)
            for package in missing:
                answer = answers[package.id] = fresh[package.id]
                key = keys[package.id]
                if key is not None and keep(answer):
                    self._write("probes", key, answer)
        return answers

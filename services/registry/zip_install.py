"""Unpack a plugin package from a zip, safely, for validation and install.

Limits (also in the proto's InstallPackageRequest): at most 16 MiB of zip, 2000 members,
8 MiB per file, 64 MiB unpacked in all and 10 s of unpacking. Only stored and deflated members
are read: zipfile inflates bzip2 and LZMA data without an output bound, so a few hundred bytes
of either could take gigabytes before the size count sees them. Members with an absolute path (`/x`, `C:x`), a
`..` component, a backslash, a NUL, a name longer than a file system takes, a symlink or any other non-regular file type, and
encrypted members are rejected before anything is written; sizes are enforced while
extracting too (a member's declared size is not trusted).

Layout: one top-level folder named after the plugin id (`journal/PLUGIN.md`, …), or the
package files at the root with the plugin id given by the caller.
"""

from __future__ import annotations

import io
import shutil
import stat
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from services.registry.diagnostics import Diagnostic, DiagnosticBag
from services.registry.manifest_fields import PLUGIN_ID, RESERVED_PLUGIN_IDS

MAX_ZIP_BYTES = 16 * 1024 * 1024
MAX_MEMBERS = 2000
MAX_MEMBER_BYTES = 8 * 1024 * 1024
MAX_TOTAL_BYTES = 64 * 1024 * 1024
MAX_UNPACK_SECONDS = 10.0
# What a file system takes (NAME_MAX), and a bound on a whole member path.
MAX_NAME_BYTES = 255
MAX_PATH_BYTES = 1024
READ_CHUNK = 64 * 1024
# Deflate output is bounded per read (zipfile passes max_length); the other methods' is not.
READABLE_COMPRESSIONS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflate"}
ARCHIVE = "(zip)"


@dataclass
class Unpacked:
    """A package unpacked into a private temporary folder; `root` is the package folder."""

    plugin_id: str
    root: Path | None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    _tmp: Path | None = None

    def cleanup(self) -> None:
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __enter__(self) -> Unpacked:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()


def _member_problem(info: zipfile.ZipInfo) -> tuple[str, str] | None:
    name = info.filename
    if "\x00" in name or "\\" in name:
        return "zip-unsafe-path", f"`{name!r}` contains a backslash or NUL"
    if name.startswith("/") or (len(name) > 1 and name[1] == ":") or name.startswith("//"):
        return "zip-absolute-path", f"`{name}` is an absolute path"
    if any(part == ".." for part in PurePosixPath(name).parts):
        return "zip-path-traversal", f"`{name}` leaves the package through `..`"
    if len(name.encode()) > MAX_PATH_BYTES or any(len(part.encode()) > MAX_NAME_BYTES for part in PurePosixPath(name).parts):
        return "zip-path-too-long", (f"`{name[:80]}…` is too long a path: at most {MAX_NAME_BYTES} bytes a folder or file name "
                                     f"and {MAX_PATH_BYTES} in all")
    # Unix mode in the high bits; archivers that store only permission bits leave the type 0.
    file_type = stat.S_IFMT(info.external_attr >> 16)
    if file_type == stat.S_IFLNK:
        return "zip-symlink", f"`{name}` is a symbolic link; packages hold regular files only"
    if file_type not in (0, stat.S_IFREG, stat.S_IFDIR):
        return "zip-special-file", f"`{name}` is not a regular file or folder"
    if info.flag_bits & 0x1:
        return "zip-encrypted", f"`{name}` is encrypted"
    if info.compress_type not in READABLE_COMPRESSIONS:
        return "zip-compression", f"`{name}` uses compression method {info.compress_type}; packages use deflate (what zip tools write by default) or none"
    if info.file_size > MAX_MEMBER_BYTES:
        return "zip-too-large", f"`{name}` unpacks to {info.file_size} bytes; the limit is {MAX_MEMBER_BYTES} per file"
    return None


def _layout(names: list[str], plugin_id: str) -> tuple[str, str] | tuple[None, str]:
    """(prefix to strip, plugin id), or (None, why not)."""
    files = [name for name in names if not name.endswith("/")]
    if "PLUGIN.md" in files:
        if not plugin_id:
            return None, "the zip holds PLUGIN.md at its root: give the plugin id, or put the package in a folder named after it"
        return "", plugin_id
    tops = {name.split("/", 1)[0] for name in names if name.split("/", 1)[0] not in ("__MACOSX",)}
    if len(tops) != 1:
        return None, "the zip must hold one package: a single top-level folder named after the plugin id"
    top = tops.pop()
    if plugin_id and plugin_id != top:
        return None, f"the zip's folder `{top}` differs from the plugin id `{plugin_id}`"
    return f"{top}/", top


def unpack(data: bytes, *, plugin_id: str = "") -> Unpacked:
    bag = DiagnosticBag(plugin_id=plugin_id, file=ARCHIVE)
    result = Unpacked(plugin_id=plugin_id, root=None, diagnostics=bag.items)
    if len(data) > MAX_ZIP_BYTES:
        bag.error("zip-too-large", f"the zip is {len(data)} bytes; the limit is {MAX_ZIP_BYTES}")
        return result
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        infos = archive.infolist()
    except (zipfile.BadZipFile, ValueError, OSError) as error:
        bag.error("zip-invalid", f"not a readable zip archive: {error}")
        return result
    if len(infos) > MAX_MEMBERS:
        bag.error("zip-too-many-members", f"the zip has {len(infos)} members; the limit is {MAX_MEMBERS}")
        return result
    _check_members(infos, bag)
    if bag.has_errors:
        return result
    prefix, resolved_id = _layout([info.filename for info in infos], plugin_id)
    if prefix is None:
        bag.error("zip-layout", resolved_id)
        return result
    if not PLUGIN_ID.match(resolved_id) or resolved_id in RESERVED_PLUGIN_IDS:
        bag.error("invalid-id", f"`{resolved_id}` is not a usable plugin id")
        return result
    result.plugin_id = resolved_id
    tmp = Path(tempfile.mkdtemp(prefix="covel-install-"))
    result._tmp = tmp
    root = tmp / resolved_id
    try:
        root.mkdir()
        if _extract(archive, infos, prefix, root, bag):
            result.root = root
    except BaseException:
        result.cleanup()  # nothing of a refused package stays behind
        raise
    return result


def _check_members(infos: list[zipfile.ZipInfo], bag: DiagnosticBag) -> None:
    """What the archive's directory says, before anything is written: each member's name and kind, no duplicates, the total size."""
    seen: set[str] = set()
    for info in infos:
        problem = _member_problem(info)
        if problem:
            bag.error(problem[0], problem[1], field_path=info.filename)
        elif info.filename.rstrip("/") in seen:
            bag.error("zip-duplicate-member", f"`{info.filename}` appears twice", field_path=info.filename)
        seen.add(info.filename.rstrip("/"))
    if sum(info.file_size for info in infos) > MAX_TOTAL_BYTES:
        bag.error("zip-too-large", f"the zip unpacks to more than {MAX_TOTAL_BYTES} bytes")


def _extract(archive: zipfile.ZipFile, infos: list[zipfile.ZipInfo], prefix: str, root: Path, bag: DiagnosticBag) -> bool:
    """The members under `prefix` written below `root`; False (with the error in `bag`) at the first that cannot be.
    Sizes are counted as written: the directory's sizes may lie."""
    total = 0
    deadline = time.monotonic() + MAX_UNPACK_SECONDS
    for info in infos:
        if not info.filename.startswith(prefix) or info.filename.startswith("__MACOSX/"):
            continue
        relative = info.filename[len(prefix) :]
        if not relative:
            continue
        target = root / relative
        if not target.resolve().is_relative_to(root.resolve()):
            bag.error("zip-path-traversal", f"`{info.filename}` leaves the package", field_path=info.filename)
            return False
        written = 0
        try:
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(info) as source, open(target, "xb") as sink:
                while chunk := source.read(READ_CHUNK):
                    written += len(chunk)
                    total += len(chunk)
                    if written > MAX_MEMBER_BYTES or total > MAX_TOTAL_BYTES:
                        bag.error("zip-too-large", f"`{info.filename}` unpacks beyond the size limits", field_path=info.filename)
                        return False
                    if time.monotonic() > deadline:
                        bag.error("zip-too-slow", f"unpacking took longer than {MAX_UNPACK_SECONDS:g} s", field_path=info.filename)
                        return False
                    sink.write(chunk)
        except (zipfile.BadZipFile, OSError, RuntimeError, NotImplementedError) as error:
            # An OS error's text names the registry's unpack folder: say what failed, not where.
            why = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
            bag.error("zip-invalid", f"`{info.filename}` cannot be unpacked: {why}", field_path=info.filename)
            return False
    return True

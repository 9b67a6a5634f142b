"""GetMediaFile: a file a world or a plugin declares for clients to show, read from its package (docs/web.md,
"Media and webview files"). Only declared files: a world's `media[]` paths; a plugin's webview pages and the
files beside them (the folder of each `webview.src`). Content types come from an allow-list by extension (nothing
else is served: no script of a world, no file without a known type), a file is at most MAX_MEDIA_BYTES, and a path
that is absolute, climbs out (`..`) or leads out of the package through a link is refused."""

from __future__ import annotations

import posixpath
from pathlib import Path

from services.registry.catalogue import Snapshot
from services.registry.loaded_package import LoadedPackage
from services.registry.loaded_world import LoadedWorld
from services.registry.world_proto import unknown_world
from shared.errors import ServiceError, invalid_argument, not_found
from shared.ui_panel_specs import webview_of

MAX_MEDIA_BYTES = 16 * 1024 * 1024
MAX_PATH_CHARS = 512
# Extension -> content type. Pictures and sound for both; a webview's folder may also hold its page, style and script.
MEDIA_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
    ".avif": "image/avif",
    ".mp3": "audio/mpeg",
    ".ogg": "audio/ogg",
    ".oga": "audio/ogg",
    ".opus": "audio/ogg",
    ".wav": "audio/wav",
    ".flac": "audio/flac",
    ".m4a": "audio/mp4",
    ".webm": "audio/webm",
}
WEBVIEW_TYPES = {
    **MEDIA_TYPES,
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".json": "application/json",
    ".svg": "image/svg+xml",
}


def clean_path(path: str) -> str:
    """A package-relative POSIX path, normalised; INVALID_ARGUMENT for one that is empty, absolute or climbs out."""
    if not path or len(path) > MAX_PATH_CHARS:
        raise invalid_argument("path", f"a file of the package, relative to its root (1 to {MAX_PATH_CHARS} characters)")
    if "\\" in path or "\0" in path or path.startswith("/") or ":" in path.split("/")[0]:
        raise invalid_argument("path", f"{path!r} is not a relative path inside the package (no `\\`, no leading `/`, no drive)")
    normal = posixpath.normpath(path)
    if normal == ".." or normal.startswith("../") or "/../" in f"/{path}/":
        raise invalid_argument("path", f"{path!r} climbs out of its folder (`..`); name the file from the package's root")
    return normal


def _undeclared(owner: str, path: str, declared: str) -> ServiceError:
    return not_found(
        f"{owner} declares no file {path!r} to show ({declared})",
        "covel.scheduler.v1.MediaFile",
        f"{owner}/{path}",
        reason="MEDIA_NOT_DECLARED",
    )


def world_file(world: LoadedWorld, path: str) -> tuple[Path, str]:
    """The world's file and its content type: a `media[]` path, of an allowed type."""
    declared = {posixpath.normpath(m.path) for m in (world.manifest.media or [])} if world.manifest else set()
    if path not in declared:
        raise _undeclared(f"world `{world.id}`", path, "its world.yaml `media[]` lists the files it shows")
    return world.root_dir, _content_type(path, MEDIA_TYPES)


def plugin_file(package: LoadedPackage, path: str) -> tuple[Path, str]:
    """The plugin's file and its content type: a file in the folder of one of its webview pages."""
    folders = set()
    for _location, file, spec in package.ui_panels:
        webview = webview_of(spec)
        if webview is not None:
            folders.add(posixpath.dirname(posixpath.normpath(posixpath.join(posixpath.dirname(file), webview[0]))))
    if posixpath.dirname(path) not in folders:
        raise _undeclared(f"plugin `{package.id}`", path, "a plugin shows the files in the folder of a webview panel's page")
    return package.root_dir, _content_type(path, WEBVIEW_TYPES)


def _content_type(path: str, types: dict[str, str]) -> str:
    found = types.get(posixpath.splitext(path)[1].lower())
    if found is None:
        raise invalid_argument("path", f"{path!r} is not of a type served to clients; one of {', '.join(sorted(types))}")
    return found


def read_media(snapshot: Snapshot, world_id: str, plugin_id: str, written: str) -> tuple[bytes, str]:
    """(the file's bytes, its content type); INVALID_ARGUMENT or NOT_FOUND (with ResourceInfo) as above."""
    if bool(world_id) == bool(plugin_id):
        raise invalid_argument("world_id", "name exactly one of world_id and plugin_id: whose file it is")
    path = clean_path(written)
    if world_id:
        world = snapshot.world(world_id)
        if world is None:
            raise unknown_world(world_id)
        root, content_type = world_file(world, path)
    else:
        package = snapshot.get(plugin_id)
        if package is None:
            raise not_found(f"no plugin `{plugin_id}`", "covel.registry.v1.PluginPackage", plugin_id, reason="PLUGIN_NOT_FOUND")
        root, content_type = plugin_file(package, path)
    return _read(root, path), content_type


def _read(root: Path, path: str) -> bytes:
    base = root.resolve()
    target = (base / path).resolve()
    if not target.is_relative_to(base):
        raise invalid_argument("path", f"{path!r} leads out of the package (a link)")
    if not target.is_file():
        raise not_found(
            f"the package declares {path!r} but holds no such file",
            "covel.scheduler.v1.MediaFile",
            path,
            reason="MEDIA_FILE_MISSING",
        )
    size = target.stat().st_size
    if size > MAX_MEDIA_BYTES:
        raise invalid_argument("path", f"{path!r} is {size} bytes; a file served to clients is at most {MAX_MEDIA_BYTES}")
    return target.read_bytes()

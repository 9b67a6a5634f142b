"""One call for `covel import` and the ImportWorld RPC: a file's bytes (or an unpacked CHARX folder's files)
to a world package installed in a worlds folder."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import grpc

from services.registry.importing.card_mapping import source_to_world, world_id_of
from services.registry.importing.card_source import ImportSource, read_source
from services.registry.importing.charx import CARD_FILE, write_charx
from services.registry.importing.limits import FILE_MAX, ZIP_MEMBERS_MAX, ZIP_TOTAL_MAX, refused
from services.registry.importing.world_merge import merge_world
from services.registry.importing.world_package import install_world
from services.registry.loaded_world import LoadedWorld
from shared.errors import ServiceError


def import_bytes(data: bytes, worlds_dir: Path, world_id: str = "", replace: bool = False, merge: bool = False) -> LoadedWorld:
    return import_source(read_source(data), worlds_dir, world_id, replace, merge)


def import_source(source: ImportSource, worlds_dir: Path, world_id: str = "", replace: bool = False, merge: bool = False) -> LoadedWorld:
    """A new world package; with `merge`, what the file brings added to the existing world `world_id` (world_merge.py)."""
    world = source_to_world(source)
    if merge:
        if not world_id:
            raise refused("world_id", "name the world to merge into")
        return merge_world(world, worlds_dir, world_id)
    return install_world(world, worlds_dir, world_id or world_id_of(world.manifest["name"]), replace)


def import_world(data: bytes, world_dirs: Sequence[Path], served: Any, world_id: str = "", replace: bool = False,
                 merge: bool = False) -> LoadedWorld:
    """ImportWorld: into the first world folder; ALREADY_EXISTS (WORLD_EXISTS) for an id a served world has, unless
    `replace` (and then only a world of that first folder is replaced); with `merge`, into that world of the first folder."""
    source = read_source(data)
    if merge:
        return import_source(source, world_dirs[0], world_id, merge=True)
    world = source_to_world(source)
    wanted = world_id or world_id_of(world.manifest["name"])
    existing = served.world(wanted)
    if existing is not None and not (replace and existing.root_dir.parent == world_dirs[0].resolve()):
        raise ServiceError(grpc.StatusCode.ALREADY_EXISTS, f"a world `{wanted}` is already served from {existing.root_dir.parent}; "
                           "pick another world_id" + ("" if replace else ", or set replace"), reason="WORLD_EXISTS")
    return install_world(world, world_dirs[0], wanted, replace)


def read_path(path: Path) -> bytes:
    """A card file's bytes; an unpacked CHARX folder (card.json at its root) as a CHARX zip of its files."""
    if path.is_dir():
        if not (path / CARD_FILE).is_file():
            raise refused("file", f"{path} is a folder without {CARD_FILE}: name a card file or an unpacked CHARX")
        return _zipped(path)
    size = path.stat().st_size
    if size > FILE_MAX:
        raise refused("file", f"is {size} bytes; an import reads at most {FILE_MAX}")
    return path.read_bytes()


def _zipped(folder: Path) -> bytes:
    files = [item for item in sorted(folder.rglob("*")) if item.is_file() and not item.is_symlink()]
    if len(files) > ZIP_MEMBERS_MAX:
        raise refused("file", f"{folder} holds {len(files)} files; a CHARX holds at most {ZIP_MEMBERS_MAX}")
    if sum(item.stat().st_size for item in files) > ZIP_TOTAL_MAX:
        raise refused("file", f"{folder} holds more than {ZIP_TOTAL_MAX} bytes")
    members = {item.relative_to(folder).as_posix(): item.read_bytes() for item in files}
    return write_charx(members.pop(CARD_FILE), members)

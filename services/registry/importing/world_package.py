"""Writing an imported world as a package of a worlds folder: world.yaml, lorebook.yaml and the media files,
written beside the target, loaded and checked by the registry's own world loader, then moved into place (a
world that does not load is never left in the folder)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import yaml

from services.registry.importing.card_mapping import ImportedWorld
from services.registry.importing.limits import refused
from services.registry.loaded_world import WORLD_FILE, LoadedWorld
from services.registry.world_loader import load_world
from services.registry.world_models import WORLD_ID
from shared.bounded_yaml import MAX_BYTES

LOREBOOK_FILE = "lorebook.yaml"
HEADER = "# Imported by `covel import` (docs/worlds.md, \"Import\"); `covel export` writes it back as a V3 card.\n"


def dump_yaml(value: Any) -> str:
    return yaml.safe_dump(value, allow_unicode=True, sort_keys=False, width=120)


def write_package(world: ImportedWorld, root: Path) -> None:
    """The files of `world` in the empty folder `root`; refuses a YAML file the world loader would not read."""
    manifest = dict(world.manifest)
    lorebook = manifest.pop("lorebook", None)
    _write(root / WORLD_FILE, HEADER + dump_yaml(manifest), "data")
    if lorebook:
        _write(root / LOREBOOK_FILE, dump_yaml(lorebook), "data.character_book.entries")
    for relative, body in world.files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)


def _write(path: Path, text: str, field: str) -> None:
    size = len(text.encode("utf-8"))
    if size > MAX_BYTES:
        raise refused(field, f"makes {path.name} {size} bytes of YAML; a world's file holds at most {MAX_BYTES // 1024} KiB: "
                             "shorten the entries or split the card")
    path.write_text(text, encoding="utf-8")


def install_world(world: ImportedWorld, worlds_dir: Path, world_id: str, replace: bool = False) -> LoadedWorld:
    """Write, check and move the world into `worlds_dir/world_id`; refuses a world that does not load."""
    if not WORLD_ID.match(world_id):
        raise refused("world", f"`{world_id[:80]}` is not a world id (lowercase letters, digits, `.`, `_`, `-`; at most 64)")
    target = worlds_dir / world_id
    if target.exists() and not replace:
        raise refused("world", f"a world `{world_id}` is already in {worlds_dir}; pick another id or replace it")
    worlds_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".import-", dir=worlds_dir))
    try:
        root = staging / world_id
        root.mkdir()
        write_package(world, root)
        loaded = load_world(root)
        problems = [item for item in loaded.diagnostics if item.is_error]
        if problems:
            first = problems[0]
            raise refused(f"{first.file}:{first.field_path}" if first.field_path else first.file,
                          f"the imported world does not load: {first.code} {first.message}")
        if target.exists():
            shutil.rmtree(target)
        root.rename(target)
        loaded.root_dir = target.resolve()
        return loaded
    finally:
        shutil.rmtree(staging, ignore_errors=True)

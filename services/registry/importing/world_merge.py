"""Importing into an existing world (`covel import <file> --world <id> --merge`, ImportWorld's `merge`): the world
keeps its own fields (name, description, opening, author, settings, data) and files, and gains what the card or
lorebook brings: its lorebook entries, characters and openings (one with an id the world has already replaces it:
importing the same file again updates the world instead of doubling it) and its media files. The merged package is
checked by the world loader before it replaces the old one, as every import is."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import yaml

from services.registry.importing.card_mapping import ImportedWorld
from services.registry.importing.limits import refused
from services.registry.importing.world_package import LOREBOOK_FILE, _write, dump_yaml
from services.registry.loaded_world import WORLD_FILE, LoadedWorld
from services.registry.world_loader import load_world
from shared.bounded_yaml import load_yaml

MERGE_HEADER = (
    '# Merged with an imported card or lorebook by `covel import --merge` (docs/worlds.md, "Import"); '
    "the earlier file's comments are not kept.\n"
)
# The lists a merge adds to, each item known by its id; characters and the lorebook may be files of their own
# (`characters: ./cast.yaml`, or characters.yaml / lorebook.yaml by convention), merged where they are.
MERGED_LISTS = ("openings", "media")
IN_FILES = {"characters": ("characters.yaml", "data.characters"), "lorebook": (LOREBOOK_FILE, "data.character_book.entries")}


def _by_id(kept: list[Any], added: list[Any]) -> list[Any]:
    """`kept` with `added` on top: an added item whose id is kept replaces it in place, the others go at the end."""
    merged = list(kept)
    index = {item.get("id"): position for position, item in enumerate(merged) if isinstance(item, dict) and item.get("id")}
    for item in added:
        key = item.get("id") if isinstance(item, dict) else None
        if key in index:
            merged[index[key]] = item
        else:
            merged.append(item)
    return merged


def _read_yaml(path: Path, field: str) -> Any:
    try:
        return load_yaml(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        raise refused(field, f"cannot merge into {path.name}: {str(error).splitlines()[0]}") from None


def _merge_list(root: Path, manifest: dict[str, Any], name: str, default_file: str, items: list[Any], field: str) -> None:
    """`items` merged where the world keeps its `name` list: in world.yaml, in the file it names, or in the file by convention."""
    written = manifest.get(name)
    if isinstance(written, list):
        manifest[name] = _by_id(written, items)
        return
    path = root / written.removeprefix("./") if isinstance(written, str) else root / default_file
    if not isinstance(written, str) and not path.is_file() and name != "lorebook":
        manifest[name] = items
        return
    kept = _read_yaml(path, field) if path.is_file() else []
    _write(path, dump_yaml(_by_id(kept if isinstance(kept, list) else [], items)), field)


def merged_files(root: Path, imported: ImportedWorld) -> None:
    """Rewrite the copy of a world at `root` with `imported` merged into it."""
    manifest = _read_yaml(root / WORLD_FILE, "world")
    if not isinstance(manifest, dict):
        raise refused("world", f"{WORLD_FILE} of the world is not a mapping of fields")
    added = dict(imported.manifest)
    for name in MERGED_LISTS:
        if added.get(name):
            manifest[name] = _by_id(manifest.get(name) or [], added[name])
    for name, (default_file, field) in IN_FILES.items():
        if added.get(name):
            _merge_list(root, manifest, name, default_file, added[name], field)
    if added.get("lorebookSettings") and "lorebookSettings" not in manifest:
        manifest["lorebookSettings"] = added["lorebookSettings"]
    _write(root / WORLD_FILE, MERGE_HEADER + dump_yaml(manifest), "data")
    for relative, body in imported.files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)


def merge_world(imported: ImportedWorld, worlds_dir: Path, world_id: str) -> LoadedWorld:
    """Merge into `worlds_dir/world_id` (NOT_FOUND-like refusal when it is not there); refuses a result that does not load."""
    target = worlds_dir / world_id
    if not (target / WORLD_FILE).is_file():
        raise refused("world", f"there is no world `{world_id}` in {worlds_dir} to merge into; leave out merge to make a new one")
    staging = Path(tempfile.mkdtemp(prefix=".merge-", dir=worlds_dir))
    try:
        root = staging / world_id
        shutil.copytree(target, root, symlinks=True)
        merged_files(root, imported)
        loaded = load_world(root)
        # Loaded without the plugin catalogue: a key a plugin contributes reads as unknown here, before and after
        # alike. Only what the merge brought in is refused.
        known = {(item.code, item.file, item.field_path) for item in load_world(target).diagnostics if item.is_error}
        problems = [item for item in loaded.diagnostics if item.is_error and (item.code, item.file, item.field_path) not in known]
        if problems:
            first = problems[0]
            raise refused(
                f"{first.file}:{first.field_path}" if first.field_path else first.file,
                f"the merged world does not load: {first.code} {first.message}",
            )
        old = staging / f"{world_id}.old"
        target.rename(old)
        root.rename(target)
        loaded.root_dir = target.resolve()
        return loaded
    finally:
        shutil.rmtree(staging, ignore_errors=True)

"""One world package: `world.yaml`, its characters, data sources and translations, read and checked.

A world folder holds `world.yaml` (services/registry/world_models.py), optionally a characters
file (`characters: ./cast.yaml`, or `characters.yaml` by convention when `characters` is not
written), the data files its `data:` sources name, and `world.<locale>.yaml` translations.
Every problem is a diagnostic naming the file and the field (diagnostics.py); a world with an
error is FAILED and no session starts in it. `load_world` never raises for bad input: the net
in `load_world_guarded` turns anything unforeseen into one `world-unloadable` diagnostic.

The loaded world is loaded_world.py's LoadedWorld; reading the package's YAML files is world_files.py;
the checks are world_checks, world_data, world_lorebook and world_translations, in the order below.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from services.registry import world_checks, world_data, world_lorebook, world_translations
from services.registry.diagnostics import DiagnosticBag, add_validation_errors
from services.registry.loaded_package import LoadedPackage
from services.registry.loaded_world import WORLD_FILE, LoadedWorld
from services.registry.manifest_reading import exact_child
from services.registry.package_files import PackageFiles
from services.registry.packs import Packs, builtin_packs
from services.registry.world_files import listed_items, read_yaml_file
from services.registry.world_models import WORLD_FIELDS, WORLD_ID, CharacterDecl, WorldManifest
from shared.logs import get_logger

log = get_logger(component="world_loader")

DEFAULT_CHARACTERS_FILE = "characters.yaml"
CHARACTERS_YAML_CODE = "characters-yaml"
CHARACTERS_NOT_LIST_CODE = "characters-not-list"


def _manifest(root: Path, files: PackageFiles, bag: DiagnosticBag) -> tuple[WorldManifest | None, dict[str, Any]]:
    present, wrong_case = exact_child(root, WORLD_FILE)
    if not present:
        hint = f"rename {wrong_case} to {WORLD_FILE}" if wrong_case else f"add a {WORLD_FILE} with at least `name`"
        bag.error("world-manifest-missing", f"the world folder has no {WORLD_FILE}", hint=hint)
        return None, {}
    data = read_yaml_file(files, WORLD_FILE, bag, code="world-yaml")
    if data is None:
        if not bag.has_errors:
            bag.error("world-not-mapping", f"{WORLD_FILE} is empty", hint="write at least `name: <the world's name>`")
        return None, {}
    if not isinstance(data, dict):
        bag.error("world-not-mapping", f"{WORLD_FILE} is a {type(data).__name__}, not a mapping of fields")
        return None, {}
    try:
        return WorldManifest.model_validate(data), data
    except ValidationError as error:
        add_validation_errors(bag, error.errors(), data, file=WORLD_FILE, known_fields=WORLD_FIELDS)
        return None, data


def _check_id(world: LoadedWorld, manifest: WorldManifest, bag: DiagnosticBag) -> None:
    if not WORLD_ID.match(world.id):
        bag.error("invalid-id", f"the folder name `{world.id}` is not a world id (lowercase letters, digits, `.`, `_`, `-`; at most 64)",
                  hint="rename the folder")
    if manifest.id is not None and manifest.id != world.id:
        bag.error("id-mismatch", f"`id` is `{manifest.id}` but the folder is `{world.id}`", field_path="id",
                  hint="the id is the folder name: rename one of them, or leave `id` out")


def _character_list(world: LoadedWorld, manifest: WorldManifest, files: PackageFiles, bag: DiagnosticBag) -> list[Any]:
    """The characters as written, and where (world.yaml or the characters file)."""
    listed = listed_items(manifest.characters, "characters", DEFAULT_CHARACTERS_FILE, "characters", files, bag,
                          codes=(CHARACTERS_YAML_CODE, CHARACTERS_NOT_LIST_CODE))
    world.characters_file, world.characters_prefix = listed.file, listed.prefix
    return listed.items


def _characters(world: LoadedWorld, written: Sequence[Any], extra_fields: frozenset[str], bag: DiagnosticBag) -> None:
    """Each character checked against CharacterDecl; characterField values set aside; ids unique."""
    seen: dict[str, int] = {}
    for index, raw in enumerate(written):
        where = f"{world.characters_prefix}[{index}]" if world.characters_prefix else f"[{index}]"
        if isinstance(raw, dict) and isinstance(raw.get("id"), str):
            world.written_character_ids.add(raw["id"])
        try:
            character = CharacterDecl.model_validate(raw)
        except ValidationError as error:
            add_validation_errors(bag, error.errors(), raw, file=world.characters_file, prefix=where, known_fields=WORLD_FIELDS)
            continue
        for key in sorted(set(character.model_extra or {}) - extra_fields):
            bag.error("unknown-key", f"unknown key `{key}` in a character", file=world.characters_file, field_path=f"{where}.{key}",
                      hint="a character has id, name, type, aliases, description, attributes, and the fields data sources name as characterField")
        if character.id in seen:
            first = f"{world.characters_prefix}[{seen[character.id]}]"
            bag.error("duplicate-character", f"character `{character.id}` is also {first}",
                      file=world.characters_file, field_path=f"{where}.id", hint="give each character its own id")
            continue
        seen[character.id] = index
        for name in extra_fields & set(character.model_extra or {}):
            world.character_data.setdefault(name, {})[character.id] = (character.model_extra or {})[name]
        world.characters.append(character.model_dump(include={"id", "name", "type", "aliases", "description", "personality", "attributes"},
                                                     exclude_none=True))


def load_world(root: Path, packages: Sequence[LoadedPackage] = (), packs: Packs | None = None) -> LoadedWorld:
    """The world package in folder `root`, checked against the installed plugin `packages`."""
    bag = DiagnosticBag(plugin_id="", file=WORLD_FILE)
    world = LoadedWorld(id=root.name, root_dir=root.resolve(), diagnostics=bag.items)
    files = PackageFiles(root)
    manifest, _raw = _manifest(root, files, bag)
    if manifest is None:
        return world
    world.manifest = manifest
    _check_id(world, manifest, bag)
    world.data_sources = world_data.data_sources(manifest, files, bag, packages)
    character_fields = frozenset(source.character_field for source in world.data_sources if source.character_field)
    _characters(world, _character_list(world, manifest, files, bag), character_fields, bag)
    world_checks.check_world(world, manifest, files, bag, {package.id: package for package in packages},
                             packs if packs is not None else builtin_packs())
    world_data.check_records(world, files, bag, packages)
    world.lorebook = world_lorebook.read_lorebook(world, manifest, files, bag)
    world.translations = world_translations.read_translations(world, files, bag)
    return world


def load_world_guarded(root: Path, packages: Sequence[LoadedPackage] = (), packs: Packs | None = None) -> LoadedWorld:
    """load_world, with any failure it did not foresee as this world's diagnostic (never the registry's end)."""
    try:
        return load_world(root, packages, packs)
    except Exception as error:  # the net: a loader bug or an unforeseen input fails this world alone
        log.exception("world.load_crashed", world_dir=str(root))
        bag = DiagnosticBag(plugin_id="", file=WORLD_FILE)
        bag.error("world-unloadable", f"the world could not be loaded ({type(error).__name__}); it is left out",
                  hint="the registry log has the details; simplify the world or report the problem")
        return LoadedWorld(id=root.name, root_dir=root.resolve(), diagnostics=bag.items)


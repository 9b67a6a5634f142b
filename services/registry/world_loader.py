"""One world package: `world.yaml`, its characters, data sources and translations, read and checked.

A world folder holds `world.yaml` (services/registry/world_models.py), optionally a characters
file (`characters: ./cast.yaml`, or `characters.yaml` by convention when `characters` is not
written), the data files its `data:` sources name, and `world.<locale>.yaml` translations.
Every problem is a diagnostic naming the file and the field (diagnostics.py); a world with an
error is FAILED and no session starts in it. `load_world` never raises for bad input: the net
in `load_world_guarded` turns anything unforeseen into one `world-unloadable` diagnostic.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from services.registry.diagnostics import Diagnostic, DiagnosticBag, add_validation_errors, format_path
from services.registry.loaded_package import LoadedPackage
from services.registry.manifest_reading import exact_child, read_text
from services.registry.package_files import PackageFiles
from services.registry.packs import Packs, builtin_packs
from services.registry.world_models import WORLD_FIELDS, WORLD_ID, CharacterDecl, WorldManifest, WorldTranslation
from shared.bounded_yaml import load_yaml
from shared.logs import get_logger

log = get_logger(component="world_loader")

WORLD_FILE = "world.yaml"
DEFAULT_CHARACTERS_FILE = "characters.yaml"
CHARACTERS_YAML_CODE = "characters-yaml"
CHARACTERS_NOT_LIST_CODE = "characters-not-list"


class WorldState(StrEnum):
    LOADED = "loaded"
    FAILED = "failed"


@dataclass(frozen=True)
class WorldDimension:
    id: str
    name: str
    description: str
    schema: dict[str, Any]
    initial: Any


@dataclass(frozen=True)
class WorldDataSource:
    """A `data[]` entry with its files found: package-relative paths in file-name order."""

    index: int
    contract: str
    visibility: str
    # "list", "map", "document", or "" (by what each file holds: a list, or one record).
    kind: str = ""
    key: str = ""
    files: tuple[str, ...] = ()
    character_field: str = ""
    locale_array_keys: tuple[str, ...] = ()
    # Where diagnostics point: `data[2]`, or the plugin namespace whose authoring.source it is by convention.
    where: str = ""
    # Data file -> its translations by locale (`facts.zh.yaml` beside `facts.yaml`).
    translations: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()


@dataclass
class LoadedWorld:
    id: str
    root_dir: Path
    diagnostics: list[Diagnostic]
    manifest: WorldManifest | None = None
    # As sessions store them: {id, name, type, aliases?, description?, attributes?}; characterField data left out.
    characters: list[dict[str, Any]] = field(default_factory=list)
    # characterField -> {character id: the value} (what the data import hands to the accepting plugins).
    character_data: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Every character id written, valid characters or not (translations are matched against these).
    written_character_ids: set[str] = field(default_factory=set)
    # Where the characters were written: world.yaml (prefix `characters`) or the characters file (no prefix).
    characters_file: str = WORLD_FILE
    characters_prefix: str = "characters"
    # {types, attributes} as sessions store it; None when the world writes no characterSchema.
    character_schema: dict[str, Any] | None = None
    dimensions: list[WorldDimension] = field(default_factory=list)
    data_sources: list[WorldDataSource] = field(default_factory=list)
    # Lorebook entries as LorebookDecl dumps them ({id, title?, keys?, content, constant?}).
    lorebook: list[dict[str, Any]] = field(default_factory=list)
    # Each source's checked records: (key, world_references.Record), what sessions import (world_import.py);
    # and by locale, the records with that locale's translations merged in.
    records: list[tuple[WorldDataSource, list[tuple[str, Any]]]] = field(default_factory=list)
    translated_records: dict[str, list[tuple[WorldDataSource, list[tuple[str, Any]]]]] = field(default_factory=dict)
    translations: dict[str, WorldTranslation] = field(default_factory=dict)
    # pluginPolicy.plus entries that are not installed (left out of a session's request).
    missing_plugins: list[str] = field(default_factory=list)

    @property
    def loaded(self) -> bool:
        return self.manifest is not None and not any(item.is_error for item in self.diagnostics)

    @property
    def state(self) -> WorldState:
        return WorldState.LOADED if self.loaded else WorldState.FAILED


class NotJson(ValueError):
    """A YAML value JSON cannot hold (binary, a set, NaN); `path` is where."""

    def __init__(self, path: str, what: str) -> None:
        super().__init__(what)
        self.path = path


def json_ready(value: Any, path: tuple[str | int, ...] = ()) -> Any:
    """YAML's values as JSON: dates and times as ISO text (as if quoted), mapping keys as text."""
    if isinstance(value, dict):
        return {str(key): json_ready(item, (*path, str(key))) for key, item in value.items()}
    if isinstance(value, list):
        return [json_ready(item, (*path, index)) for index, item in enumerate(value)]
    if isinstance(value, datetime.date | datetime.datetime):
        return value.isoformat()
    if isinstance(value, float) and not math.isfinite(value):
        raise NotJson(format_path(path), f"`{value}` is not a number JSON can hold")
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise NotJson(format_path(path), f"a {type(value).__name__} value (YAML `!!binary`, `!!set`, …) cannot be world data")


def read_yaml_file(files: PackageFiles, relative: str, bag: DiagnosticBag, *, code: str, referred_from: tuple[str, str] | None = None) -> Any:
    """A package YAML file as JSON-ready data, or None after a diagnostic (on the file itself, or
    on the field that named it when it is missing or outside the package)."""
    where_file, where_field = referred_from or (relative, "")
    if not files.is_file(relative):
        bag.error("file-missing", f"`{relative}` does not exist in the world package", file=where_file, field_path=where_field,
                  hint=f"add {relative}, or fix the path")
        return None
    text = read_text(files.root / relative, bag, relative)
    if text is None:
        return None
    try:
        return json_ready(load_yaml(text))
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error)
        bag.error(code, f"not valid YAML{at}: {problem}", file=relative, hint="fix the YAML; quote text that YAML reads as something else")
    except NotJson as error:
        bag.error("world-value-not-json", str(error), file=relative, field_path=error.path, hint="write it as text (quoted)")
    return None


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


@dataclass(frozen=True)
class Listed:
    """A list of a world package as written: its items, the file they are in, their field path prefix there."""

    items: list[Any]
    file: str = WORLD_FILE
    prefix: str = ""


def listed_items(written: str | list[Any] | None, field: str, default_file: str, noun: str, files: PackageFiles,
                 bag: DiagnosticBag, *, codes: tuple[str, str]) -> Listed:
    """A list world.yaml holds under `field` inline, or in a YAML file of the package it names (`default_file` by
    convention when the field is not written), the file holding `[...]` or `{<field>: [...]}`. `codes`: the
    diagnostic codes of a file that is not YAML and of one that holds no list."""
    yaml_code, not_list_code = codes
    if isinstance(written, list):
        return Listed(written, WORLD_FILE, field)
    if written is None and not files.is_file(default_file):
        return Listed([], WORLD_FILE, field)
    relative = default_file if written is None else files.relative(WORLD_FILE, written)
    if relative is None:
        bag.error("file-outside-package", f"the {field} file `{written}` points outside the world package", field_path=field,
                  hint=f"write a path inside the package, e.g. ./{default_file}")
        return Listed([], WORLD_FILE, field)
    data = read_yaml_file(files, relative, bag, code=yaml_code, referred_from=(WORLD_FILE, field))
    if isinstance(data, dict) and isinstance(data.get(field), list):
        return Listed(list(data[field]), relative, field)
    if data is None or isinstance(data, list):
        return Listed(data or [], relative, "")
    bag.error(not_list_code, f"{relative} holds a {type(data).__name__}; write a list of {noun} (or `{field}: [...]`)",
              file=relative)
    return Listed([], relative, "")


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
        world.characters.append(character.model_dump(include={"id", "name", "type", "aliases", "description", "attributes"},
                                                     exclude_none=True))


def load_world(root: Path, packages: Sequence[LoadedPackage] = (), packs: Packs | None = None) -> LoadedWorld:
    """The world package in folder `root`, checked against the installed plugin `packages`."""
    from services.registry import world_checks, world_data, world_lorebook, world_translations

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


"""A world package as the registry loaded it (world_loader.py): its manifest, characters, dimensions,
data sources and their checked records, lorebook and translations.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from services.registry.diagnostics import Diagnostic
from services.registry.world_models import WorldManifest, WorldTranslation

WORLD_FILE = "world.yaml"


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

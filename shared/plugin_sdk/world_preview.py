"""ctx.world's in-execution preview: the committed world model a run found, with the world proposals it may see
applied in order (those of upstream runtimes that finished, then its own as it buffers them). Plain values; the
scheduler's WorldView and a sandboxed handler's ctx.world freeze what they hand out. Shared by the scheduler and
the sandbox worker, which imports nothing of the scheduler."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from shared.plugin_sdk.frozen import freeze

SCHEMA_SET = "character.schema.set"
CHARACTER_UPSERT = "character.upsert"
DIMENSIONS_INITIALIZE = "dimension.initialize"
DIMENSION_UPDATE = "dimension.update"
WORLD_PROPOSALS = (SCHEMA_SET, CHARACTER_UPSERT, DIMENSIONS_INITIALIZE, DIMENSION_UPDATE)


@dataclass
class WorldPreview:
    character_schema: dict[str, Any] | None = None
    # id -> the character's data with its id and version.
    characters: dict[str, dict[str, Any]] = field(default_factory=dict)
    # id -> {name, description, schema, value, version}.
    dimensions: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def of(cls, data: dict[str, Any]) -> WorldPreview:
        """From the view's plain values ({characterSchema, characters: [...], dimensions: {...}}), copied."""
        characters = {str(c.get("id")): copy.deepcopy(c) for c in data.get("characters") or [] if isinstance(c, dict)}
        return cls(copy.deepcopy(data.get("characterSchema")), characters, copy.deepcopy(dict(data.get("dimensions") or {})))

    def character_list(self) -> list[dict[str, Any]]:
        return sorted(self.characters.values(), key=lambda c: c["id"])

    def apply(self, type: str, payload: Any) -> str:
        """Apply one proposal; the view field it changed (characterSchema, characters, dimensions), or "" for none."""
        if not isinstance(payload, dict):
            return ""
        if type == SCHEMA_SET:
            self.character_schema = {"types": payload.get("types") or [], "attributes": payload.get("attributes") or {}}
            return "characterSchema"
        if type == CHARACTER_UPSERT and isinstance(payload.get("character"), dict):
            character_id = str(payload.get("characterId") or "")
            version = self.characters.get(character_id, {}).get("version", 0) + 1
            self.characters[character_id] = {**copy.deepcopy(payload["character"]), "id": character_id, "version": version}
            return "characters"
        if type == DIMENSIONS_INITIALIZE:
            for item in payload.get("dimensions") or []:
                if isinstance(item, dict) and item.get("id") and item["id"] not in self.dimensions:
                    self.dimensions[item["id"]] = {"name": item.get("name", ""), "description": item.get("description", ""),
                                                   "schema": item.get("schema"), "value": item.get("value"), "version": 1}
            return "dimensions"
        if type == DIMENSION_UPDATE:
            for item in payload.get("updates") or []:
                if isinstance(item, dict) and item.get("id") in self.dimensions:
                    current = self.dimensions[item["id"]]
                    self.dimensions[item["id"]] = {**current, "value": copy.deepcopy(item.get("value")), "version": current["version"] + 1}
            return "dimensions"
        return ""


class FrozenWorld:
    """ctx.world of a sandboxed handler, a tool's or an action's context.world: frozen, as the scheduler's WorldView;
    changing it raises TypeError. `note(name)` hears the first read of characters or characterSchema (a handler's
    read dependencies on upstream proposals); `buffer` shows the caller's own proposals in later reads."""

    NAMES = ("characterSchema", "characters", "dimensions", "seats", "worldRecord")
    NOTED = ("characterSchema", "characters")
    __slots__ = ("_note", "_noted", "_preview", "_values")

    def __init__(self, data: Mapping[str, Any], note: Any = None) -> None:
        object.__setattr__(self, "_values", {name: freeze(data.get(name)) for name in self.NAMES})
        object.__setattr__(self, "_preview", WorldPreview.of(dict(data)))
        object.__setattr__(self, "_note", note)
        object.__setattr__(self, "_noted", set())

    def buffer(self, type: str, payload: Any) -> None:
        """The handler's own world proposal (the host applies it to its view too): later reads see it."""
        preview = object.__getattribute__(self, "_preview")
        changed = preview.apply(type, payload)
        if changed:
            current = {"characterSchema": preview.character_schema, "characters": preview.character_list(),
                       "dimensions": preview.dimensions}
            object.__getattribute__(self, "_values")[changed] = freeze(current[changed])

    def __getattr__(self, name: str) -> Any:
        values = object.__getattribute__(self, "_values")
        if name not in values:
            raise AttributeError(f"ctx.world has no {name}; it has {', '.join(self.NAMES)}")
        noted = object.__getattribute__(self, "_noted")
        note = object.__getattribute__(self, "_note")
        if name in self.NOTED and name not in noted and note is not None:
            noted.add(name)
            note(name)
        return values[name]

    def __setattr__(self, name: str, value: Any) -> None:
        raise TypeError(f"ctx.world.{name} is read-only; propose a change instead")

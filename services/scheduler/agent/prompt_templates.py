"""Prompt templates: `{{ world.dimensions.<id>.value }}` and the like in a runtime's prompt and in static
prompt segments, filled from the world the turn found with its lease (the frozen snapshot: what upstream
runtimes propose this turn does not show).

    {{ world.dimensions.<id>.value }}   a dimension's value (.name, .description, .version too)
    {{ world.schema }}                  the character schema (types and attributes), as JSON
    {{ characters.npcs }}               the characters that are not player characters, one line each
    {{ characters.players }}            the player characters, one line each
    {{ characters.all }}                every character, one line each

A text is written as it is, anything else as JSON (keys sorted). A placeholder that names nothing of the world (an
unknown dimension, another root) stays as written, so an author sees it in the prompt trace.
"""

from __future__ import annotations

import json
import re
from typing import Any

from covel.store.v1 import store_pb2
from services.scheduler.world_records import character_records, dimension_records
from shared.structs import from_struct

PLACEHOLDER = re.compile(r"\{\{\s*((?:world|characters)(?:\.[A-Za-z0-9_-]+)+)\s*\}\}")
_MISSING = object()


def template_values(world: store_pb2.GetWorldResponse | None) -> dict[str, Any]:
    """What placeholders read: {world: {dimensions, schema}, characters: {all, npcs, players}}."""
    if world is None:
        return {}
    characters = character_records(world)
    return {
        "world": {
            "dimensions": {key: {field: value for field, value in record.items() if field != "schema"}
                           for key, record in dimension_records(world).items()},
            "schema": from_struct(world.character_schema) if world.HasField("character_schema") else {},
        },
        "characters": {
            "all": _lines(characters),
            "npcs": _lines([c for c in characters if c.get("type") != "player"]),
            "players": _lines([c for c in characters if c.get("type") == "player"]),
        },
    }


def _lines(characters: list[dict[str, Any]]) -> str:
    return "\n".join(f"- {c.get('name') or c['id']}" + (f": {c['description']}" if c.get("description") else "") for c in characters)


def render(text: str, values: dict[str, Any]) -> str:
    if not values or "{{" not in text:
        return text

    def fill(match: re.Match[str]) -> str:
        value: Any = values
        for part in match.group(1).split("."):
            value = value.get(part, _MISSING) if isinstance(value, dict) else _MISSING
            if value is _MISSING:
                return match.group(0)
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)

    return PLACEHOLDER.sub(fill, text)

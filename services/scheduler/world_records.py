"""The world model a turn read (store.proto GetWorldResponse) as plain records: what ctx.world, the dimension
tools, prompt placeholders, kernel inputs and character look-ups all read, converted one way."""

from __future__ import annotations

from typing import Any

from covel.store.v1 import store_pb2
from shared.structs import from_struct, from_value


def character_records(world: store_pb2.GetWorldResponse | None) -> list[dict[str, Any]]:
    """Each character's data with its id."""
    return [] if world is None else [{**from_struct(c.data), "id": c.id} for c in world.characters]


def dimension_records(world: store_pb2.GetWorldResponse | None) -> dict[str, dict[str, Any]]:
    """id -> {name, description, schema, value, version}, the committed values the turn found."""
    if world is None:
        return {}
    return {d.id: {"name": d.name, "description": d.description, "schema": from_struct(d.schema), "value": from_value(d.value),
                   "version": d.version} for d in world.dimensions}

"""world-dimension-list / world-dimension-get: the builtin tools a story reads the world's dimensions with.

They read the frozen snapshot the execution started with (the committed values the turn's lease found):
never the caller's own proposals, never the authored initial values once a session changed them.
"""

from __future__ import annotations

import copy
from typing import Any

from covel.store.v1 import store_pb2
from services.scheduler.agent.tools import KernelTools
from services.scheduler.world_records import dimension_records
from shared.plugin_sdk.tools import tool_error, tool_ok

WORLD_DIMENSION_LIST = "world-dimension-list"
WORLD_DIMENSION_GET = "world-dimension-get"


def dimension_snapshot(world: store_pb2.GetWorldResponse | None) -> dict[str, dict[str, Any]]:
    return {key: {"id": key, **record} for key, record in dimension_records(world).items()}


def add_dimension_tools(tools: KernelTools, snapshot: dict[str, dict[str, Any]]) -> None:
    """The two tools, when the session's world has dimensions."""
    if not snapshot:
        return
    frozen = copy.deepcopy(snapshot)

    async def list_dimensions(_: dict[str, Any]) -> dict[str, Any]:
        return tool_ok({"dimensions": [{key: d[key] for key in ("id", "name", "description", "value", "version")}
                                       for d in frozen.values()]})

    async def get_dimension(args: dict[str, Any]) -> dict[str, Any]:
        found = frozen.get(str(args.get("id") or ""))
        if found is None:
            return tool_error("not-found", f"the world has no dimension {args.get('id')!r} (its dimensions: {', '.join(frozen)})",
                              f"call {WORLD_DIMENSION_LIST} to see them")
        return tool_ok(copy.deepcopy(found))

    tools.add(WORLD_DIMENSION_LIST, "List the world's dimensions (id, name, description, current value) as this turn began.",
              {"type": "object", "properties": {}}, list_dimensions, read_only=True)
    tools.add(WORLD_DIMENSION_GET, "Read one world dimension by id: its value as this turn began, and its JSON Schema.",
              {"type": "object", "required": ["id"], "properties": {"id": {"type": "string", "minLength": 1}}},
              get_dimension, read_only=True)

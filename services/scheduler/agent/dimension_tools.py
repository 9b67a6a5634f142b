"""The builtin dimension tools: world-dimension-list / world-dimension-get, which a story reads the world's
dimensions with, and update-dimensions, which a dimension maintainer settles a turn with.

The readers read the frozen snapshot the execution started with (the committed values the turn's lease
found): never the caller's own proposals, never the authored initial values once a session changed them.
update-dimensions takes only new values: the versions it checks against (expectedVersion) are the snapshot's.
"""

from __future__ import annotations

import copy
from typing import Any

from covel.store.v1 import store_pb2
from services.scheduler.execution.kernel_tools import KernelTools
from services.scheduler.kinds import ProposalType
from services.scheduler.world_records import dimension_records
from shared import json_schemas
from shared.plugin_sdk.tools import tool_error, tool_ok

WORLD_DIMENSION_LIST = "world-dimension-list"
WORLD_DIMENSION_GET = "world-dimension-get"
UPDATE_DIMENSIONS = "update-dimensions"
# The store's limit on one dimension.update batch (services/store/proposals.py DIMENSIONS_MAX).
UPDATES_MAX = 64


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


def add_update_dimensions(tools: KernelTools, snapshot: dict[str, dict[str, Any]]) -> None:
    """update-dimensions for a dimension maintainer (agent.finishWith: update-dimensions): the model gives new
    values, the kernel adds the versions it read and proposes one dimension.update (committed with the run, CAS
    on the whole batch). `updates: []` settles the turn with no change. A value its schema refuses, an unknown
    or repeated id is a tool error the model can correct and call again."""
    frozen = copy.deepcopy(snapshot)

    async def update_dimensions(args: dict[str, Any]) -> dict[str, Any]:
        updates = args.get("updates")
        if not isinstance(updates, list) or not all(isinstance(item, dict) for item in updates):
            return tool_error("invalid-input", "updates must be a list of {id, value} objects", "call it with updates: [] for no change")
        if len(updates) > UPDATES_MAX:
            return tool_error("invalid-input", f"{len(updates)} updates; at most {UPDATES_MAX} in one call")
        checked, problem = _checked_updates(updates, frozen)
        if problem is not None:
            return problem
        tools.tool_writes.append({"type": ProposalType.DIMENSION_UPDATE, "payload": {"updates": checked}})
        return tool_ok({"settled": True, "updated": [item["id"] for item in checked]})

    tools.add(UPDATE_DIMENSIONS,
              "Settle this turn's world dimensions: give each changed dimension's new value (updates: [] when nothing changed).",
              {"type": "object", "required": ["updates"], "properties": {"updates": {"type": "array", "items": {
                  "type": "object", "required": ["id", "value"], "properties": {"id": {"type": "string", "minLength": 1}, "value": {}}}}}},
              update_dimensions, read_only=False)


def _checked_updates(updates: list[dict[str, Any]], frozen: dict[str, dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    checked: list[dict[str, Any]] = []
    for index, item in enumerate(updates):
        dimension_id = str(item.get("id") or "")
        found = frozen.get(dimension_id)
        if found is None:
            return [], tool_error("not-found", f"updates[{index}]: the world has no dimension {dimension_id!r} (its dimensions: {', '.join(frozen)})",
                                  f"call {WORLD_DIMENSION_LIST} to see them")
        if any(done["id"] == dimension_id for done in checked):
            return [], tool_error("invalid-input", f"updates[{index}]: dimension {dimension_id!r} is given twice")
        if "value" not in item:
            return [], tool_error("invalid-input", f"updates[{index}].value is required")
        errors = _schema_errors(found.get("schema"), item["value"])
        if errors:
            return [], tool_error("schema-violation", f"updates[{index}].value does not match dimension {dimension_id}'s schema: {errors}",
                                  "correct the value and call update-dimensions again")
        checked.append({"id": dimension_id, "value": item["value"], "expectedVersion": found.get("version", 0)})
    return checked, None


def _schema_errors(schema: Any, value: Any) -> str:
    """The first three problems of `value` against the dimension's schema ("" when it holds; the store checks again)."""
    if not isinstance(schema, dict):
        return ""
    try:
        errors = sorted(json_schemas.validator(schema).iter_errors(value), key=lambda error: list(error.absolute_path))
    except Exception:
        return ""
    return "; ".join(error.message for error in errors[:3])

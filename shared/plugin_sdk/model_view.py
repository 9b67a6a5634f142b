"""The model-facing projection of records: bookkeeping fields are removed (spec: 模型看不到的簿记字段).

Removed, when both the name and the value match: `id` / `*Id` / `*Ids` holding a UUID (or
an array of only UUIDs); `timestamp` / `*At` holding an ISO time; `sessionId` always.
A UUID that another record in the same value points to is a reference, not bookkeeping,
and is kept everywhere. A record repeating its own UUID (in its own fields, arrays, or
nested objects without an id of their own) is not a reference. Code always reads the full
records; only what goes to a model is projected.

The SDK's helpers (the spec's modelFacingJson and withModelView): `model_facing_json(value)` is the text a plugin puts
into a prompt it writes itself (ctx.gateway); `with_model_view(content, summary=)` is a tool's data of which the model
reads only the summary (an opaque handle, a long record), while code (ctx.tools.call) and contract checks read all.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeGuard

_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_ISO_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?$")


def _is_uuid(value: Any) -> TypeGuard[str]:
    return isinstance(value, str) and bool(_UUID.match(value))


def _is_id_name(name: str) -> bool:
    return name == "id" or name.endswith("Id") or name.endswith("Ids")


def _is_time_name(name: str) -> bool:
    return name == "timestamp" or name.endswith("At")


def _references(value: Any) -> set[str]:
    """UUIDs of records that some other record (or a non-self place) in `value` points to."""
    record_ids: set[str] = set()
    occurrences: list[tuple[str, str | None]] = []  # (uuid, id of the nearest enclosing record)

    def walk(node: Any, owner: str | None) -> None:
        if isinstance(node, dict):
            own = node.get("id")
            current = own if isinstance(own, str) else owner
            if _is_uuid(own):
                record_ids.add(own)
            for key, item in node.items():
                if key == "id" and item is own:
                    continue
                walk(item, current)
        elif isinstance(node, list):
            for item in node:
                walk(item, owner)
        elif _is_uuid(node):
            occurrences.append((node, owner))

    walk(value, None)
    return {uuid for uuid, owner in occurrences if uuid in record_ids and owner != uuid}


def model_facing(value: Any) -> Any:
    """A copy of `value` without bookkeeping fields (the input is not changed)."""
    referenced = _references(value)

    def keep_ids(item: Any) -> bool:
        if _is_uuid(item):
            return item in referenced
        if isinstance(item, list) and item and all(_is_uuid(entry) for entry in item):
            return any(entry in referenced for entry in item)
        return True

    def project(node: Any) -> Any:
        if isinstance(node, dict):
            projected = {}
            for key, item in node.items():
                if key == "sessionId":
                    continue
                if _is_id_name(key) and not keep_ids(item):
                    continue
                if _is_time_name(key) and isinstance(item, str) and _ISO_TIME.match(item):
                    continue
                projected[key] = project(item)
            return projected
        if isinstance(node, list):
            return [project(item) for item in node]
        return node

    return project(value)


def model_facing_json(value: Any) -> str:
    """`value` as JSON text for a prompt, bookkeeping fields removed (the kernel's own projection)."""
    return json.dumps(model_facing(value), ensure_ascii=False)


# The key of a tool's data that holds its model view (with_model_view).
MODEL_VIEW = "modelView"


def with_model_view(content: dict[str, Any], *, summary: str) -> dict[str, Any]:
    """A tool's data whose model view is `summary` alone: the model reads {"summary": summary}; code reads `content`
    with the view under "modelView"."""
    if not isinstance(content, dict):
        raise TypeError("with_model_view(content, summary=): content is the tool's data, a dict")
    if not isinstance(summary, str) or not summary.strip():
        raise ValueError("with_model_view(content, summary=): the summary is the text the model reads")
    return {**content, MODEL_VIEW: {"summary": summary}}


def model_view_of(data: Any) -> Any:
    """What the model reads of a tool's data: the summary of a with_model_view, else the data without bookkeeping."""
    view = data.get(MODEL_VIEW) if isinstance(data, dict) else None
    if isinstance(view, dict) and isinstance(view.get("summary"), str):
        return {"summary": view["summary"]}
    return model_facing(data)

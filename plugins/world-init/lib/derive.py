"""dimension-clock's pure part: the values of dimensions whose schema says `x-derive`, from the world clock."""

from __future__ import annotations

from typing import Any

# x-derive -> the field of world-time-evolution@1's `after` it reads.
DERIVED_FIELDS = {"day": "day", "time": "time", "period": "period", "hour": "hour"}


def derived_value(derive: str, after: dict[str, Any]) -> Any:
    if derive == "hour":
        return int(str(after.get("time") or "0:0").split(":")[0])
    return after.get(DERIVED_FIELDS[derive])


def derived_updates(dimensions: dict[str, Any], after: dict[str, Any] | None) -> list[dict[str, Any]]:
    """dimension.update items for the derived dimensions whose value the clock changed."""
    if not after:
        return []
    updates = []
    for dimension_id, dimension in dimensions.items():
        derive = (dimension.get("schema") or {}).get("x-derive")
        if derive not in DERIVED_FIELDS:
            continue
        value = derived_value(derive, after)
        if value is not None and value != dimension.get("value"):
            updates.append({"id": dimension_id, "value": value, "expectedVersion": dimension.get("version", 0)})
    return updates

"""A player's edit of dimension values, checked against their schemas before anything is proposed."""

import jsonschema

from shared.plugin_sdk import thaw


async def handler(ctx):
    dimensions = thaw(ctx.world.dimensions) or {}
    updates = ctx.activation.get("updates")
    if not isinstance(updates, list) or not updates:
        raise ValueError("payload.updates: give [{id, value}, ...], one item per dimension to change")
    proposed = []
    for index, update in enumerate(updates):
        dimension = dimensions.get(update.get("id")) if isinstance(update, dict) else None
        if dimension is None:
            raise ValueError(f"payload.updates[{index}].id: the world has no dimension {update!r} (it has {', '.join(dimensions) or 'none'})")
        problem = next(iter(jsonschema.Draft202012Validator(dimension["schema"]).iter_errors(update.get("value"))), None)
        if problem is not None:
            raise ValueError(f"payload.updates[{index}].value: {problem.message}")
        proposed.append({"id": update["id"], "value": update.get("value"), "expectedVersion": dimension["version"]})
    ctx.propose("dimension.update", {"updates": proposed})
    return {"updated": [update["id"] for update in proposed]}

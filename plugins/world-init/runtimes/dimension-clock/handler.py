"""Derived dimensions follow the world clock."""

from shared.plugin_sdk import thaw

from ...lib import derive


async def handler(ctx):
    time = (ctx.inputs.get("time") or {}).get("value") or {}
    # ctx.world.dimensions shows the tracker's changes of this turn, so a derived value is checked against them.
    updates = derive.derived_updates(thaw(ctx.world.dimensions) or {}, time.get("after"))
    if updates:
        ctx.propose("dimension.update", {"updates": updates})
    return {"derived": [update["id"] for update in updates]}

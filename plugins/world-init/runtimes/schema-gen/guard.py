"""Nothing to set up when the session has no world, or the world brought its own character schema."""

from shared.plugin_sdk import thaw


async def guard(ctx):
    schema = thaw(ctx.world.characterSchema) or {}
    if ctx.world.worldRecord is not None and not schema.get("attributes"):
        return None
    return {"skip": True, "success": True, "attributeCount": len(schema.get("attributes") or {}),
            "dimensionCount": len(ctx.world.dimensions), "worldSchema": schema}

"""world-data-provider@1: a character schema (and dimensions) for a world that has none."""

from shared.plugin_sdk import thaw

from ...lib import generation


async def handler(ctx):
    existing = thaw(ctx.world.dimensions) or {}
    generated = await ctx.gateway.generate_object(
        generation.prompt(ctx.execution.get("locale", "en"), thaw(ctx.world.characters) or [], existing),
        schema=generation.GENERATION_SCHEMA, name="generated-world")
    schema = generation.character_schema(generated)
    ctx.propose("character.schema.set", schema)
    dimensions = generation.new_dimensions(generated, existing)
    if dimensions:
        ctx.propose("dimension.initialize", {"dimensions": dimensions})
    return {"success": True, "attributeCount": len(schema["attributes"]), "dimensionCount": len(existing) + len(dimensions),
            "worldSchema": schema}

"""Done already: no world to make a character in, or the character was made (a new plugin version does not ask again)."""


async def guard(ctx):
    if ctx.world.worldRecord is None:
        return {"skip": True, "created": False, "characterId": None}
    made = await ctx.plugin_data.get("protagonist", "created")
    if made:
        return {"skip": True, "created": True, "characterId": made["characterId"]}
    return None

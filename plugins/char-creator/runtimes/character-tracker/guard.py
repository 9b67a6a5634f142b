async def guard(ctx):
    if await ctx.plugin_data.get("protagonist", "created"):
        return None
    return {"skip": True, "changed": []}

async def guard(ctx):
    if ctx.world.dimensions:
        return None
    return {"skip": True}

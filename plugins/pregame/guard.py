async def guard(ctx):
    if ctx.world.worldRecord is None:
        return {"skip": True, "brief": "", "protagonist": None}
    return None

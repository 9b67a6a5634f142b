"""Who is on stage now (scene-cast@1): the committed stage as the turn found it (the seed's on the first turn)."""

from ...lib.stage import cast_of


async def handler(ctx):
    return cast_of(await ctx.plugin_data.get("stage", "current"))

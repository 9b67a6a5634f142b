"""Set the stage from the world when there is none yet: its start scene and that scene's cast."""

from ...lib.context import characters, scenes, world_id
from ...lib.stage import seed_stage


async def handler(ctx):
    if await ctx.plugin_data.get("stage", "current") is not None:
        return {"seeded": False}
    stage = seed_stage(await scenes(ctx), characters(ctx), int(ctx.logical_turn), world_id(ctx))
    if stage is None:
        return {"seeded": False}
    await ctx.plugin_data.set("stage", "current", stage)
    return {"seeded": True, "scene": stage["scene"]["name"], "actors": [a["name"] for a in stage["actors"]]}

"""`direction: cues` (the setting): the story's cues suffice, so no model is asked; the direction is
worked out from them (a scene cue naming another scene, who enters, who is gone)."""

from ...lib.context import characters, scenes, value
from ...lib.stage import cues_direction


async def guard(ctx):
    if ctx.user_settings.get("direction", "agent") != "cues":
        return None
    stage = await ctx.plugin_data.get("stage", "current")
    direction = cues_direction(value(ctx, "cues"), stage, characters(ctx), list((await scenes(ctx)).values()))
    return {"skip": True, **direction}

"""Merge the turn's stage directions (stage-direction@1: the direction runtime's, and those other plugins
publish; `override: true` ones last, so they win) into the stage and commit it (scene-stage@1).

Without any direction (the direction runtime failed or was skipped) the story's cues direct the stage.
The story clock's period (world-time-evolution@1) becomes the time of day when no direction set one.
"""

from shared.plugin_sdk.values import HandlerResult

from ...lib.context import characters, locale, scenes, value, world_id
from ...lib.stage import cues_direction, resolve


async def handler(ctx):
    current = await ctx.plugin_data.get("stage", "current")
    cast = characters(ctx)
    places = list((await scenes(ctx)).values())
    directions = value(ctx, "directions")
    directions = [d for d in (directions if isinstance(directions, list) else [directions] if directions else []) if isinstance(d, dict)]
    if not directions and value(ctx, "cues"):
        directions = [cues_direction(value(ctx, "cues"), current, cast, places)]
    period = value(ctx, "time")
    stage = resolve(current, directions, characters=cast, scenes=places, turn=int(ctx.logical_turn),
                    period=period if isinstance(period, str) else None, world_id=world_id(ctx))
    if not stage["scene"].get("name"):
        # No scene yet (a world without scenes and a story without a scene cue): nothing to commit.
        return {**stage, "scene": None, "changed": []}
    effects = {}
    if stage["changed"]:
        await ctx.plugin_data.set("stage", "current", stage)
        if "scene" in stage["changed"] and current is not None:
            zh = locale(ctx).startswith("zh")
            effects["notifications"] = [{"level": "info", "title": "场景" if zh else "Scene",
                                         "text": (f"场景转到：{stage['scene']['name']}" if zh else f"The scene moves to {stage['scene']['name']}.")}]
    return HandlerResult(stage, effects=effects) if effects else stage

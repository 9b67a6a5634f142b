"""Pick the scene's track when the scene changes: scene-stage's committed scene (scene-stage@1) when
that plugin runs, else the story's scene cue. Nothing fits: the world's default track when nothing
plays yet, else the music goes on. The change is announced by `cue`, which runs next and may change
the music again on the turn's mood: the player hears of the turn's last change only."""

from ...lib.music import best, default_track, ordered, scene_of
from ...lib.playing import play, tracks_of, value


async def handler(ctx):
    tracks = await tracks_of(ctx)
    current = await ctx.plugin_data.get("playing", "current")
    key, tags = scene_of(value(ctx, "stage"), value(ctx, "cues"))
    if not tracks:
        return {"changed": False, "track": None, "why": "keep", "reason": "the world has no tracks"}
    if current is not None and (not key or key == current.get("scene")):
        return {"changed": False, "track": current["track"]["id"], "why": "keep", "reason": "same scene"}
    track = best(ordered(tracks), tags) if key else None
    if track is not None:
        if current is not None and current["track"]["id"] == track["id"]:
            await ctx.plugin_data.update("playing", "current", [{"op": "merge", "path": "", "value": {"scene": key[:200]}}])
            return {"changed": False, "track": track["id"], "why": "keep", "reason": "the new scene has the same music", "scene": key[:200]}
        return await play(ctx, dict(track), "scene", f"scene: {key}", current, scene=key, announced=False)
    if current is None:
        fallback = default_track(ordered(tracks)) or ordered(tracks)[0]
        return await play(ctx, dict(fallback), "default", "nothing else fits yet", None, scene=key, announced=False)
    if key:
        await ctx.plugin_data.update("playing", "current", [{"op": "merge", "path": "", "value": {"scene": key[:200]}}])
    return {"changed": False, "track": current["track"]["id"], "why": "keep", "reason": "no track fits the new scene", **({"scene": key[:200]} if key else {})}

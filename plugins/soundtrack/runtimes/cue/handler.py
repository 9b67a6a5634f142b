"""Change the music on a mood cue, or on an override another plugin publishes (music-cue@1).

An override wins: the last one naming a track (by id, tags or mood) plays. Otherwise, when the story's
mood cue has tracks and the one playing is not among them, the mood's track that best fits the scene plays.
The turn's last change is announced: this runtime's, else the one `scene` made before it.
"""

from shared.plugin_sdk.values import HandlerResult

from ...lib.music import announce, best, norm, ordered, override_track, words
from ...lib.playing import locale_of, play, tracks_of, value


async def handler(ctx):
    decision = await decide(ctx)
    if isinstance(decision, HandlerResult):
        return decision
    scene = value(ctx, "scene") or {}
    current = await ctx.plugin_data.get("playing", "current")
    if scene.get("changed") and current is not None:
        return HandlerResult(decision, effects=announce(current, locale_of(ctx)))
    return decision


async def decide(ctx):
    tracks = await tracks_of(ctx)
    current = await ctx.plugin_data.get("playing", "current")
    cues = value(ctx, "cues") or {}
    scene_tags = words((current or {}).get("scene")) | ({norm(current["scene"])} if (current or {}).get("scene") else set())
    overrides = value(ctx, "overrides") or []
    track, reason = override_track(ordered(tracks), overrides if isinstance(overrides, list) else [overrides], scene_tags)
    if track is not None:
        if current is not None and current["track"]["id"] == track["id"]:
            return {"changed": False, "track": track["id"], "why": "keep", "reason": "the override's track already plays"}
        return await play(ctx, dict(track), "override", reason or "the story calls for it", current,
                          scene=(current or {}).get("scene", ""), mood=cues.get("mood", ""))
    mood = cues.get("mood") or ""
    if not mood or not ctx.user_settings.get("followMood", True) or not tracks:
        return {"changed": False, "track": ((current or {}).get("track") or {}).get("id"), "why": "keep", "reason": "no mood cue"}
    playing = tracks.get(((current or {}).get("track") or {}).get("id", ""))
    if playing is not None and norm(mood) in {norm(m) for m in playing.get("moods") or ()}:
        return {"changed": False, "track": playing["id"], "why": "keep", "reason": f"it fits the mood: {mood}", "mood": mood}
    hold = int(ctx.user_settings.get("holdTurns", 0) or 0)
    if current is not None and current.get("why") != "default" and int(ctx.logical_turn) - int(current.get("since", 0)) < hold:
        return {"changed": False, "track": current["track"]["id"], "why": "keep", "reason": "the track holds", "mood": mood}
    track = best(ordered(tracks), scene_tags, mood)
    if track is None:
        return {"changed": False, "track": ((current or {}).get("track") or {}).get("id"), "why": "keep",
                "reason": f"no track for the mood: {mood}", "mood": mood}
    return await play(ctx, dict(track), "mood", f"mood: {mood}", current, scene=(current or {}).get("scene", ""), mood=mood)

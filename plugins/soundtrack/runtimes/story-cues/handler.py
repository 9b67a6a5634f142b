"""The story's scene and mood cues of the turn (narrative-engine@2 `cues`), or nothing."""


async def handler(ctx):
    story = (ctx.inputs.get("story") or {}).get("value") if ctx.inputs else None
    cues = story.get("cues") if isinstance(story, dict) else None
    found = {}
    if isinstance(cues, dict):
        for field, limit in (("scene", 200), ("mood", 80)):
            value = cues.get(field)
            if isinstance(value, str) and value.strip():
                found[field] = " ".join(value.split())[:limit]
    return found

"""Apply affinity.changes@1 to the scores dataset (inc on the score, clamped to -100..100)."""

import re

LOW, HIGH = -100, 100


def character_key(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.strip().lower()).strip("-")[:64] or "someone"


async def handler(ctx):
    applied = []
    for change in ctx.inputs["changes"]["value"]:
        name, delta = change["character"].strip(), int(change["delta"])
        if delta == 0:
            continue
        key = character_key(name)
        current = await ctx.plugin_data.get("scores", key)
        before = current["score"] if current else 0
        after = max(LOW, min(HIGH, before + delta))
        if current is None:
            await ctx.plugin_data.set("scores", key, {"id": key, "name": name, "score": after, "lastChange": delta,
                                                      "reason": change["reason"][:200]})
        else:
            await ctx.plugin_data.update("scores", key, [
                {"op": "inc", "path": "/score", "by": after - before},
                {"op": "merge", "path": "", "value": {"lastChange": delta, "reason": change["reason"][:200]}},
            ])
        applied.append({"character": key, "name": name, "delta": delta, "score": after})
    return {"applied": applied}

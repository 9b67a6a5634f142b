"""Apply affinity.changes@1 to the scores dataset (inc on the score, clamped to -100..100).

A character is keyed by its id in the session's world model when the judge's name matches one
(id, name or alias, any case: "Old Tobin" and "Tobin" are both `tobin`); a character the world
model does not know is keyed by a slug of the name.
"""

import hashlib
import re

from ...lib.tiers import tier

LOW, HIGH = -100, 100
_KEY = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")


def slug(name: str) -> str:
    key = re.sub(r"[^a-z0-9]+", "-", name.strip().lower()).strip("-")[:64]
    if key and name.strip().isascii():
        return key
    # A name in another script ("米拉") has no ASCII slug: a stable short hash keeps characters apart.
    return "character-" + hashlib.sha1(" ".join(name.split()).casefold().encode("utf-8")).hexdigest()[:10]


def world_character(name: str, characters) -> dict | None:
    """The world model's character this name means: by id, then name, then alias (case-insensitive)."""
    wanted = " ".join(name.split()).casefold()
    for field in ("id", "name"):
        hits = [c for c in characters if " ".join(str(c.get(field, "")).split()).casefold() == wanted]
        if len(hits) == 1:
            return hits[0]
    hits = [c for c in characters if wanted in (" ".join(str(a).split()).casefold() for a in c.get("aliases") or [])]
    return hits[0] if len(hits) == 1 else None


def character_key(name: str, characters=()) -> tuple[str, str]:
    """(dataset key, display name) of a character the judge named."""
    known = world_character(name, characters)
    if known is not None:
        key = str(known["id"]).lower()
        return (key if _KEY.match(key) else slug(key)), str(known.get("name") or name)
    return slug(name), name.strip()


async def handler(ctx):
    characters = list(getattr(ctx.world, "characters", None) or [])
    applied = []
    for change in ctx.inputs["changes"]["value"]:
        delta = int(change["delta"])
        if delta == 0:
            continue
        key, name = character_key(change["character"], characters)
        current = await ctx.plugin_data.get("scores", key)
        before = current["score"] if current else 0
        after = max(LOW, min(HIGH, before + delta))
        if current is None:
            await ctx.plugin_data.set("scores", key, {"id": key, "name": name[:80], "score": after, "tier": tier(after),
                                                      "lastChange": delta, "reason": change["reason"][:200]})
        else:
            await ctx.plugin_data.update("scores", key, [
                {"op": "inc", "path": "/score", "by": after - before},
                {"op": "merge", "path": "", "value": {"tier": tier(after), "lastChange": delta, "reason": change["reason"][:200]}},
            ])
        applied.append({"character": key, "name": name, "delta": delta, "score": after})
    return {"applied": applied}

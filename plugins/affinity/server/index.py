"""affinity's prompt.segment@1 provider: a read-only projection of the current scores.

The provider is a pure function of the scores records the kernel hands it, so it gives the same
segment for the same data, and it never writes.
"""

from ..lib.tiers import TIERS_ZH, tier

MAX_ROWS = 12


def register(covel):
    covel.provide_extension("prompt.segment@1", "standing", standing_segment)


def standing_segment(ctx, request: dict | None = None):
    """{id, content, position} of the segment, or None when no one has a score yet.

    `request` is the kernel's prompt.segment@1 request; its `data` holds this plugin's records."""
    scores = ((request or {}).get("data") or {}).get("scores") or {}
    records = sorted(scores.values(), key=lambda record: -abs(record.get("score", 0)))[:MAX_ROWS]
    if not records:
        return None
    chinese = str(getattr(ctx, "locale", "en")).startswith("zh")
    if chinese:
        lines = ["角色对玩家的好感："] + [f"- {r['name']}：{r['score']}（{TIERS_ZH[tier(r['score'])]}）" for r in records]
    else:
        lines = ["How the characters feel about the player:"] + [f"- {r['name']}: {r['score']} ({tier(r['score'])})" for r in records]
    return {"id": "standing", "content": "\n".join(lines), "position": "post-history"}

"""affinity's prompt.segment@1 provider: a read-only projection of the current scores.

The provider is a pure function of the scores records the kernel hands it, so it gives the same
segment for the same data, and it never writes.
"""

TIERS = ((-60, "hostile"), (-20, "cold"), (20, "neutral"), (60, "warm"), (101, "devoted"))
TIERS_ZH = {"hostile": "敌视", "cold": "冷淡", "neutral": "中立", "warm": "友好", "devoted": "忠诚"}
MAX_ROWS = 12


def register(covel):
    covel.provide_extension("prompt.segment@1", "standing", standing_segment)


def tier(score: int) -> str:
    for limit, name in TIERS:
        if score < limit:
            return name
    return TIERS[-1][1]


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

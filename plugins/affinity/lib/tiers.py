"""The standing tiers of a score: hostile < -60 <= cold < -20 <= neutral < 20 <= warm < 60 <= devoted. The apply
runtime records a character's tier with its score (the panel shows it), the prompt segment names it."""

TIERS = ((-60, "hostile"), (-20, "cold"), (20, "neutral"), (60, "warm"), (101, "devoted"))
TIERS_ZH = {"hostile": "敌视", "cold": "冷淡", "neutral": "中立", "warm": "友好", "devoted": "忠诚"}


def tier(score: int) -> str:
    for limit, name in TIERS:
        if score < limit:
            return name
    return TIERS[-1][1]

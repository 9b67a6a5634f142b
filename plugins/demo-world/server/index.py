"""demo-world's prompt.segment@1 provider: the secrets the reveal runtime brought out, for the story.

The kernel hands the provider the plugin's data as the story's execution sees it, so a secret revealed
by this turn's pre-turn runtime is in this turn's story."""

MAX_SHOWN = 5


def register(covel):
    covel.provide_extension("prompt.segment@1", "revealed", revealed_segment)


def revealed_segment(ctx, request: dict | None = None):
    revealed = ((request or {}).get("data") or {}).get("revealed") or {}
    shown = sorted(revealed.values(), key=lambda record: -int(record.get("turn") or 0))[:MAX_SHOWN]
    if not shown:
        return None
    chinese = str(getattr(ctx, "locale", "en")).startswith("zh")
    heading = "已经揭开的秘密（故事可以让角色说出或表现出来）：" if chinese else "Secrets now out (the story may let a character say or show them):"
    return {"id": "revealed", "content": "\n".join([heading, *(f"- {record['text']}" for record in shown)]), "position": "system"}

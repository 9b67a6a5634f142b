"""core-quest's prompt.segment@1 provider: the state summary of the open quests, read-only.

A pure function of the quest records the kernel hands it (its own data as the execution sees it,
so this turn's log shows in a later runtime of the same turn): the same data, the same segment."""

from ..lib import quests


def register(covel):
    covel.provide_extension("prompt.segment@1", "open-quests", open_quests_segment)


def open_quests_segment(ctx, request: dict | None = None):
    """{id, content, position} of the summary, or None when no quest is open (or the setting is 0)."""
    records = ((request or {}).get("data") or {}).get("quests") or {}
    try:
        limit = int((ctx.get_own_settings() or {}).get("summaryQuests", 5))
    except (AttributeError, TypeError, ValueError):
        limit = 5
    text = quests.summary(records, (request or {}).get("locale") or getattr(ctx, "locale", "en"), limit)
    if not text:
        return None
    return {"id": "open-quests", "content": text, "position": "post-history"}

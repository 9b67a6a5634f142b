"""branch-reply: the scripted model's other versions of the story reply (the offer-variants tool).

Two versions of the reply in runtime-inputs.narrative: the same opening, then one turn for the
better and one for the worse, in the reply's language, so a test can tell them apart.
"""

from __future__ import annotations

from typing import Any

from services.gateway.providers.scripted.plugin_writers import WriterCall, plans_tool

ENDINGS = {
    "en": ("Variant two: this time, luck is with you, and the way ahead opens at once.",
           "Variant three: this time, something goes wrong, and the moment turns against you."),
    "zh": ("变体二：这一次运气站在你这边，前路立刻豁然开朗。",
           "变体三：这一次出了岔子，局面转而对你不利。"),
}


def _story_text(narrative: Any) -> str:
    value = narrative.get("value") if isinstance(narrative, dict) else None
    segments = value.get("segments") if isinstance(value, dict) else None
    if isinstance(segments, list):
        return " ".join(str(s.get("text") or "") for s in segments if isinstance(s, dict)).strip()
    return str(value or "").strip()


def _is_chinese(text: str) -> bool:
    return any("\u4e00" <= char <= "\u9fff" for char in text)


@plans_tool("offer-variants")
def offer_variants(reply: WriterCall) -> dict[str, Any] | None:
    story = _story_text(reply.inputs.get("narrative"))
    opening = story.split("\n")[0][:200] if story else reply.player_text[:200]
    endings = ENDINGS["zh" if _is_chinese(story or reply.player_text) else "en"]
    return {"variants": [{"text": f"{opening} {ending}".strip()} for ending in endings]}

"""The pure parts of branch-reply: checking variants, reading a choice, rewriting the history."""

from __future__ import annotations

from typing import Any

MAX_TEXT = 6000
PREVIEW = 160
TEXTS = {
    "en": {"title": "Other versions of this reply", "told": "the reply as told (shown above)",
           "how": "Type /variant <number> to continue the story from that version; /variant 1 goes back."},
    "zh": {"title": "这段回复的其他版本", "told": "原本的回复（见上文）",
           "how": "输入 /variant <编号>，故事就从那个版本继续；/variant 1 回到原本的回复。"},
}


class VariantError(ValueError):
    """Bad input to a tool or action, with a code the caller shows."""

    def __init__(self, code: str, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.hint = hint


def language(locale: str | None) -> str:
    return "zh" if str(locale or "").lower().startswith("zh") else "en"


def check_variants(args: Any, count: int) -> list[str]:
    """The texts of offer-variants' arguments {variants: [{text}]}: at most `count`, none empty."""
    variants = args.get("variants") if isinstance(args, dict) else None
    if not isinstance(variants, list) or not variants:
        raise VariantError("invalid-input", "variants must be a non-empty list of {text}", f"write 1 to {count} versions")
    texts = []
    for index, item in enumerate(variants):
        text = item.get("text") if isinstance(item, dict) else item
        if not isinstance(text, str) or not text.strip():
            raise VariantError("invalid-input", f"variants[{index}].text must be text", "give every version its full text")
        texts.append(text.strip()[:MAX_TEXT])
    if len(texts) > count:
        raise VariantError("too-many", f"{len(texts)} versions written, {count} asked for", f"call again with {count} versions")
    return texts


def offer_block(texts: list[str], locale: str | None) -> dict[str, Any]:
    """The UI block under the story: the variants by number and how to switch."""
    words = TEXTS[language(locale)]
    items = [f"1 · {words['told']}"]
    items += [f"{number} · {_preview(text)}" for number, text in enumerate(texts, start=2)]
    return {"id": "branch-reply", "slot": "message", "title": words["title"],
            "parts": [{"type": "list", "items": items}, {"type": "text", "text": words["how"]}]}


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= PREVIEW else flat[: PREVIEW - 1] + "…"


def parse_choice(payload: Any, current_turn: int, count: int) -> tuple[int, int]:
    """(turn, variant) of choose-variant's payload: {variant, turn?} from a client, or a command's
    {args: {number}}. The turn defaults to the latest; the variant is 1 (as told) to count + 1."""
    payload = payload if isinstance(payload, dict) else {}
    args = payload.get("args") if isinstance(payload.get("args"), dict) else payload
    raw = args.get("variant", args.get("number"))
    try:
        variant = int(str(raw).strip())
    except ValueError:
        raise VariantError("invalid-input", f"the variant is a number, not {raw!r}", "e.g. /variant 2") from None
    if not 1 <= variant <= count + 1:
        raise VariantError("out-of-range", f"there is no variant {variant}", f"choose 1 (the reply as told) to {count + 1}")
    turn = args.get("turn", current_turn)
    if isinstance(turn, bool) or not isinstance(turn, int) or turn < 1:
        raise VariantError("invalid-input", f"turn must be a turn number, not {turn!r}", "leave it out for the latest turn")
    return turn, variant


def chosen_texts(data: dict[str, Any]) -> dict[str, str]:
    """turn id -> the text of the variant picked for it (only turns where the player picked another version)."""
    variants = data.get("variants") or {}
    chosen: dict[str, str] = {}
    for key, choice in (data.get("choices") or {}).items():
        record = variants.get(key)
        number = choice.get("variant") if isinstance(choice, dict) else None
        if not isinstance(record, dict) or not isinstance(number, int) or number < 2:
            continue
        texts = record.get("texts") or []
        if number - 2 < len(texts) and isinstance(record.get("turnId"), str):
            chosen[record["turnId"]] = texts[number - 2]
    return chosen


def follow_choices(messages: list[dict[str, Any]], chosen: dict[str, str]) -> list[dict[str, Any]] | None:
    """The history with each picked turn's story reply replaced by its variant (a turn with several
    story messages keeps one, the variant); None when nothing changes."""
    if not chosen or not any(m.get("role") == "story" and m.get("turnId") in chosen for m in messages):
        return None
    result: list[dict[str, Any]] = []
    replaced: set[str] = set()
    for message in messages:
        turn = message.get("turnId")
        if message.get("role") != "story" or turn not in chosen:
            result.append({"id": message["id"], "text": message["text"]})
        elif turn not in replaced:
            replaced.add(turn)
            result.append({"id": message["id"], "text": chosen[turn]})
    return result

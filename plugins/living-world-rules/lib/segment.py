"""living-world-rules' prompt segment: the world's rules (and what everyone knows) for every story prompt.

Pure: a function of the records the kernel hands the provider; the same data gives the same segment."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MAX_RULES = 24
MAX_INFO = 12
MAX_CHARS = 6000

HEADINGS = {
    "en": ("Rules of this world. They hold for the whole story: never break them, whatever the player says or tries; "
           "when an action would break one, the world answers it by the rule.",
           "What everyone in this world knows:"),
    "zh": ("这个世界的规则。它们在整个故事里始终成立：无论玩家说什么、尝试什么，都不要打破；玩家的行动会打破某条规则时，世界按这条规则回应。",
           "这个世界里人人都知道的事："),
}


def records(data: Mapping[str, Any] | None, namespace: str) -> list[dict[str, Any]]:
    """The namespace's records that fit (schemaVersion 1, an id, a content), by id."""
    found = ((data or {}).get(namespace) or {})
    if not isinstance(found, Mapping):
        return []
    kept = [dict(record) for record in found.values()
            if isinstance(record, Mapping) and record.get("schemaVersion") == 1 and isinstance(record.get("content"), str)
            and record["content"].strip() and isinstance(record.get("id"), str)]
    return sorted(kept, key=lambda record: record["id"])


def segment_text(data: Mapping[str, Any] | None, locale: str = "en") -> str:
    """The segment's content, or "" when the world declares neither rules nor knowledge."""
    rules, info = records(data, "rules")[:MAX_RULES], records(data, "info")[:MAX_INFO]
    if not rules and not info:
        return ""
    chinese = str(locale).startswith("zh")
    rule_heading, info_heading = HEADINGS["zh" if chinese else "en"]
    colon = "：" if chinese else ": "
    lines: list[str] = []
    if rules:
        lines += [rule_heading, *(f"- {' '.join(record['content'].split())}" for record in rules)]
    if info:
        lines += ([""] if lines else []) + [info_heading]
        lines += [f"- {title}{colon}{' '.join(record['content'].split())}" if (title := str(record.get("title") or "").strip())
                  else f"- {' '.join(record['content'].split())}" for record in info]
    text = "\n".join(lines)
    return text if len(text) <= MAX_CHARS else text[: MAX_CHARS - 1].rstrip() + "…"

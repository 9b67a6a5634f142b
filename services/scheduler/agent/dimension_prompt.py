"""The world's dimensions in a story's prompt: the framework's default segment (the spec: a budgeted projection,
not the whole record), one system segment of each dimension's name and current value as the turn found them, bookkeeping
removed. A budgeted projection: each value at most VALUE_CHARS as JSON, all of it at most CHARS_SHOWN; when something
was cut the segment's id says so (`dimensions-truncated`), and the full records stay behind the dimension tools
(world-dimension-get / world-dimension-list)."""

from __future__ import annotations

import json
from typing import Any

from covel.store.v1 import store_pb2
from services.scheduler.world_records import dimension_records
from shared.plugin_sdk.model_view import model_facing

VALUE_CHARS = 300
CHARS_SHOWN = 2000
HEADINGS = {"en": "The world now (its dimensions; call world-dimension-get for the whole record):",
            "zh": "世界现状（各维度的当前值；完整记录用 world-dimension-get 查看）："}


def _value_text(value: Any) -> tuple[str, bool]:
    text = value if isinstance(value, str) else json.dumps(model_facing(value), ensure_ascii=False, separators=(",", ":"))
    return (text, False) if len(text) <= VALUE_CHARS else (f"{text[:VALUE_CHARS - 1]}…", True)


def dimension_segment(world: store_pb2.GetWorldResponse | None, locale: str) -> list[dict[str, Any]]:
    """[] without dimensions, else one system segment: `- <name>: <value>` a line, in the world's order."""
    records = dimension_records(world)
    if not records:
        return []
    lines, used, cut = [], 0, False
    for record in records.values():
        text, shortened = _value_text(record["value"])
        line = f"- {record['name'] or 'dimension'}: {text}"
        if used + len(line) > CHARS_SHOWN:
            cut = True
            break
        lines.append(line)
        used += len(line)
        cut = cut or shortened
    heading = HEADINGS["zh" if locale.startswith("zh") else "en"]
    return [{"id": "dimensions-truncated" if cut else "dimensions", "pluginId": "framework", "position": "system",
             "content": "\n".join([heading, *lines])}]

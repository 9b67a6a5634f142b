"""io.selfData: a runtime's own plugin data as prompt rows."""

from __future__ import annotations

import json
from typing import Any

from shared.manifest.runtime import SelfData
from shared.plugin_sdk.model_view import model_facing

SUMMARY_CHARS = 200


def self_data_block(declaration: SelfData, entries: dict[str, Any]) -> str:
    """io.selfData: one row per key, `- <key> | <value JSON>` (summary: cut to 200 characters),
    newest keys last, bookkeeping fields removed, an `id` equal to the key not repeated."""
    namespace = declaration.namespace
    tag = (declaration.as_ or f"<{namespace}>").strip("<>") or namespace
    rows = []
    for key, value in list(entries.items())[-declaration.max_entries:]:
        shown = model_facing(value)
        if isinstance(shown, dict) and shown.get("id") == key:
            shown = {field: item for field, item in shown.items() if field != "id"}
        text = json.dumps(shown, ensure_ascii=False, separators=(",", ":"))
        if declaration.format == "summary" and len(text) > SUMMARY_CHARS:
            text = text[: SUMMARY_CHARS - 1] + "…"
        rows.append(f"- {key} | {text}")
    body = "\n".join(rows) if rows else "(none yet)"
    return f"<{tag}>\n{body}\n</{tag}>"

"""The extraction prompt: the body of PLUGIN.md (PLUGIN.zh.md in a zh session), with the inputs after it
in the same `<runtime-inputs>` block an agent's prompt carries."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PACKAGE = Path(__file__).resolve().parent.parent


def body(locale: str = "en", root: Path = PACKAGE, stem: str = "PLUGIN") -> str:
    """The prompt text after the front matter of `<stem>.md`, or of `<stem>.zh.md` for a zh locale."""
    variant = root / f"{stem}.zh.md"
    path = variant if str(locale or "").startswith("zh") and variant.is_file() else root / f"{stem}.md"
    text = path.read_text(encoding="utf-8")
    if not text.startswith("---"):
        return text.strip()
    parts = text[3:].split("\n---", 1)
    return parts[1].strip() if len(parts) == 2 else ""


def system_prompt(locale: str, inputs: dict[str, Any], root: Path = PACKAGE, stem: str = "PLUGIN") -> str:
    shown = json.dumps({name: {"value": value} for name, value in inputs.items()}, ensure_ascii=False, indent=1)
    return f"{body(locale, root, stem)}\n\n<runtime-inputs>\n{shown}\n</runtime-inputs>"

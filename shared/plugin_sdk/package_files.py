"""What a plugin's code reads from its own package and its world: a prompt written as the body of a manifest
(PLUGIN.md, RUNTIME.md, and its `.zh.md` translation for a Chinese session), and a world's media reference.

    from shared.plugin_sdk.package_files import media_ref, prompt_body

    system = prompt_body(PACKAGE / "runtimes" / "log", "RUNTIME", ctx.execution.get("locale", "en"))
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any

_URL = re.compile(r"^https?://\S+$")


def prompt_body(folder: Path, stem: str, locale: str) -> str:
    """The text after the front matter of `<folder>/<stem>.md`, or of `<stem>.zh.md` when the locale is Chinese
    and the package has it (read once per file version)."""
    variant = folder / f"{stem}.zh.md"
    path = variant if str(locale or "").lower().startswith("zh") and variant.is_file() else folder / f"{stem}.md"
    return _body(path, path.stat().st_mtime)


@lru_cache(maxsize=32)
def _body(path: Path, mtime: float) -> str:
    text = path.read_text(encoding="utf-8")
    if not text.startswith("---"):
        return text.strip()
    parts = text[3:].split("\n---", 1)
    return parts[1].strip() if len(parts) == 2 else ""


def media_ref(value: Any) -> dict[str, str] | None:
    """A world's media string as clients fetch it: {src, source: url | world} (a package-relative file); None
    when it is neither (empty, absolute, or reaching out of the package)."""
    if not isinstance(value, str) or not value.strip():
        return None
    value = value.strip()
    if _URL.match(value):
        return {"src": value, "source": "url"}
    if value.startswith("/") or ".." in value or "\\" in value or ":" in value:
        return None
    return {"src": value, "source": "world"}

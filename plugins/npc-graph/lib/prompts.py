"""The extractor's prompt: the body of its RUNTIME.md, or RUNTIME.zh.md for a zh session (read once per file version)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

RUNTIMES = Path(__file__).resolve().parent.parent / "runtimes"


@lru_cache(maxsize=8)
def _body(path: Path, mtime: float) -> str:
    text = path.read_text(encoding="utf-8")
    return text.split("---", 2)[2].strip() if text.startswith("---") else text.strip()


def prompt(runtime: str, locale: str) -> str:
    """The prompt of runtimes/<runtime> for the session's locale (zh* reads RUNTIME.zh.md when there is one)."""
    folder = RUNTIMES / runtime
    path = folder / "RUNTIME.zh.md" if str(locale).lower().startswith("zh") and (folder / "RUNTIME.zh.md").is_file() else folder / "RUNTIME.md"
    return _body(path, path.stat().st_mtime)

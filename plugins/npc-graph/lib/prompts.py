"""The extractor's prompt: the body of its RUNTIME.md, or RUNTIME.zh.md for a zh session."""

from __future__ import annotations

from pathlib import Path

from shared.plugin_sdk.package_files import prompt_body

RUNTIMES = Path(__file__).resolve().parent.parent / "runtimes"


def prompt(runtime: str, locale: str) -> str:
    """The prompt of runtimes/<runtime> for the session's locale (zh* reads RUNTIME.zh.md when there is one)."""
    return prompt_body(RUNTIMES / runtime, "RUNTIME", locale)

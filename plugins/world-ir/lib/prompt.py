"""The extraction prompt: the body of PLUGIN.md (PLUGIN.zh.md in a zh session), with the inputs after it
in the same `<runtime-inputs>` block an agent's prompt carries."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from shared.plugin_sdk.package_files import prompt_body

PACKAGE = Path(__file__).resolve().parent.parent


def system_prompt(locale: str, inputs: dict[str, Any], root: Path = PACKAGE, stem: str = "PLUGIN") -> str:
    shown = json.dumps({name: {"value": value} for name, value in inputs.items()}, ensure_ascii=False, indent=1)
    return f"{prompt_body(root, stem, locale)}\n\n<runtime-inputs>\n{shown}\n</runtime-inputs>"

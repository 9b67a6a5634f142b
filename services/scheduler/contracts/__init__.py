"""Kernel-owned contract schemas (JSON Schema files named `<contract>.schema.json`)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

CONTRACTS_DIR = Path(__file__).parent
NARRATIVE_ENGINE = "narrative-engine@2"


@cache
def kernel_contract_schema(contract_id: str) -> dict[str, Any] | None:
    path = CONTRACTS_DIR / f"{contract_id}.schema.json"
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))

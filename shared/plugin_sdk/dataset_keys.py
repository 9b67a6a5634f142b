"""The dataset key rule (the spec's datasetKey): the generated dataset tools look a key up as written, then in this
normal form; plugin code writing the same dataset makes its keys with dataset_key so the tools find the rows."""

from __future__ import annotations

import re


def dataset_key(key: str) -> str:
    """Trimmed, lower case, runs of spaces and underscores as one '-'."""
    return re.sub(r"[\s_]+", "-", key.strip().lower())

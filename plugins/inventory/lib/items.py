"""Item keys and the starting-items setting (no I/O here)."""

import re

_COUNTED = re.compile(r"^\s*(\d{1,3})\s*[x×]\s*(.+?)\s*$", re.IGNORECASE)


def item_key(name: str) -> str:
    """The dataset key of an item: its name in lower case, words joined by '-' (datasetKey's rule)."""
    key = re.sub(r"[^a-z0-9]+", "-", name.strip().lower()).strip("-")
    return key[:64] or "item"


def parse_starting_items(text: str) -> list[tuple[str, int]]:
    """"brass lantern\\n3 x copper coin" -> [("brass lantern", 1), ("copper coin", 3)]."""
    items = []
    for line in (text or "").splitlines():
        if not line.strip():
            continue
        counted = _COUNTED.match(line)
        name, quantity = (counted.group(2), int(counted.group(1))) if counted else (line.strip(), 1)
        if not 1 <= quantity <= 999:
            raise ValueError(f"startingItems: {line.strip()!r} has a count outside 1..999")
        items.append((name[:80], quantity))
    return items

"""Item keys and the starting-items setting (no I/O here)."""

import hashlib
import re

_COUNTED = re.compile(r"^\s*(\d{1,3})\s*[x×]\s*(.+?)\s*$", re.IGNORECASE)


def item_key(name: str) -> str:
    """The dataset key of an item: its name in lower case, words joined by '-' (datasetKey's rule);
    a name with other than ASCII letters gets a stable hash instead, so "铜钥匙" and "提灯" differ."""
    key = re.sub(r"[^a-z0-9]+", "-", name.strip().lower()).strip("-")[:64]
    if key and key.isascii() and name.strip().isascii():
        return key
    # A name in another script ("铜钥匙") has no ASCII slug: a stable short hash keeps items apart.
    digest = hashlib.sha1(" ".join(name.split()).casefold().encode("utf-8")).hexdigest()[:10]
    return f"{key[:50]}-{digest}" if key else f"item-{digest}"


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


MAX_TERMS = 200


def vocabulary(records) -> dict:
    """world-ir.vocabulary@1 of the `items` records ({key: record} or [record]): one term per item, by name."""
    values = records.values() if isinstance(records, dict) else records
    terms = []
    for record in sorted((r for r in values if isinstance(r, dict) and r.get("id") and r.get("name")), key=lambda r: r["id"]):
        note = f"carried ×{record.get('quantity', 1)}" + (", in hand" if record.get("equipped") else "")
        terms.append({"id": record["id"], "name": record["name"], "note": note})
    return {"source": "inventory", "kind": "item", "terms": terms[:MAX_TERMS]}

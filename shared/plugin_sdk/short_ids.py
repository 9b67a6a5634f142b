"""Semantic short ids (the spec's shortId / shortIdBatch): `<kind>-<slug>` from a label, such as `npc-lin-yao`, with a
random suffix only when the id is taken. The random part comes from ctx.random (a required argument: there is no
other random source), so a seeded session (COVEL_RANDOM_SEED) makes the same ids each run.

    npc = short_id("npc", "Lin Yao", {c["id"] for c in ctx.world.characters}, ctx.random)
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection, Sequence
from typing import Any

ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"
SUFFIX_CHARS = 4
MAX_SLUG = 40
_NOT_WORD = re.compile(r"[^\w]+|_+")


def slug(label: str) -> str:
    """Lower case, words joined by `-` (letters of any script kept), at most MAX_SLUG characters."""
    words = _NOT_WORD.sub("-", unicodedata.normalize("NFKC", str(label)).casefold()).strip("-")
    return words[:MAX_SLUG].rstrip("-")


def _suffix(random: Any) -> str:
    number = random.int(0, len(ALPHABET) ** SUFFIX_CHARS)
    chars = []
    for _ in range(SUFFIX_CHARS):
        number, digit = divmod(number, len(ALPHABET))
        chars.append(ALPHABET[digit])
    return "".join(reversed(chars))


def short_id(kind: str, label: str, taken: Collection[str], random: Any) -> str:
    """`<kind>-<slug of label>`, or with `-<4 random characters>` when that is in `taken` (or the label has no word)."""
    if not kind or not isinstance(kind, str):
        raise ValueError("short_id(kind, label, taken, random): kind is the id's prefix, e.g. npc")
    if random is None or not hasattr(random, "int"):
        raise TypeError("short_id(kind, label, taken, random): pass ctx.random; there is no other random source")
    base = f"{kind}-{slug(label)}" if slug(label) else kind
    found = base if base != kind and base not in taken else f"{base}-{_suffix(random)}"
    while found in taken:
        found = f"{base}-{_suffix(random)}"
    return found


def short_id_batch(kind: str, labels: Sequence[str], taken: Collection[str], random: Any) -> list[str]:
    """short_id for each label, every id distinct from `taken` and from each other."""
    used = set(taken)
    ids = []
    for label in labels:
        ids.append(short_id(kind, label, used, random))
        used.add(ids[-1])
    return ids

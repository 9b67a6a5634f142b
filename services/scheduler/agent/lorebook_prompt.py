"""The lorebook in a story's prompt: the entries that come up this turn, as one system segment.

An entry comes up when it is `constant`, or when one of its keys is in the player's input or the latest
story text (case-insensitive; whole words where words are spaced, anywhere in Chinese or Japanese text).
Disabled entries never do. At most ENTRIES_SHOWN entries and CHARS_SHOWN characters: constant ones
first, then by how early their key first appears. Read from the world the turn found with its lease.
"""

from __future__ import annotations

import re
from typing import Any

from covel.common.v1 import common_pb2
from covel.store.v1 import store_pb2

ENTRIES_SHOWN = 12
CHARS_SHOWN = 6000
HEADINGS = {"en": "Lorebook (what this world knows; use what fits the scene):", "zh": "世界设定（这个世界已知的事；用得上的就用）："}


def key_position(key: str, text: str) -> int:
    """Where `key` first appears in `text` (-1: nowhere): a whole word when the key is spaced script."""
    needle = key.strip().casefold()
    if not needle:
        return -1
    haystack = text.casefold()
    if needle.isascii() and re.search(r"\w", needle):
        found = re.search(rf"(?<!\w){re.escape(needle)}(?!\w)", haystack)
        return found.start() if found else -1
    return haystack.find(needle)


def coming_up(entries: list[store_pb2.LorebookEntry], text: str) -> list[store_pb2.LorebookEntry]:
    ranked: list[tuple[int, int, store_pb2.LorebookEntry]] = []
    for order, entry in enumerate(entries):
        if entry.disabled:
            continue
        positions = [position for key in entry.keys if (position := key_position(key, text)) >= 0]
        if entry.constant or positions:
            ranked.append((-1 if entry.constant else min(positions), order, entry))
    shown: list[store_pb2.LorebookEntry] = []
    used = 0
    for _, _, entry in sorted(ranked, key=lambda item: (item[0], item[1])):
        line = _line(entry)
        if len(shown) >= ENTRIES_SHOWN or used + len(line) > CHARS_SHOWN:
            break
        shown.append(entry)
        used += len(line)
    return shown


def _line(entry: store_pb2.LorebookEntry) -> str:
    return f"- {entry.title}: {entry.content}" if entry.title else f"- {entry.content}"


def lorebook_segment(world: store_pb2.GetWorldResponse | None, player_message: str, history: list[common_pb2.Message],
                     locale: str) -> list[dict[str, Any]]:
    """[] or one system segment of the entries that come up."""
    if world is None or not world.lorebook:
        return []
    latest_story = next((message.text for message in reversed(history) if message.role == "story"), "")
    shown = coming_up(list(world.lorebook), f"{player_message}\n{latest_story}")
    if not shown:
        return []
    heading = HEADINGS["zh" if locale.startswith("zh") else "en"]
    content = "\n".join([heading, *(_line(entry) for entry in shown)])
    return [{"id": "lorebook", "pluginId": "framework", "position": "system", "content": content}]

"""Resolve a story's speakers and cues.present to the session's characters (spec: 说话人解析).

Only a character's full id, name or an alias matches (no partial matches). A resolved segment
gets `speakerId` and the character's current name; names that match nobody, or more than one
character, stay as written and are listed as unresolved.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Resolution:
    segments: list[dict[str, Any]]
    present_character_ids: list[str] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)


def _index(characters: Iterable[dict[str, Any]]) -> dict[str, set[str]]:
    names: dict[str, set[str]] = {}
    for character in characters:
        character_id = character.get("id")
        if not isinstance(character_id, str):
            continue
        labels = [character_id, character.get("name"), *(character.get("aliases") or [])]
        for label in labels:
            if isinstance(label, str) and label.strip():
                names.setdefault(label.strip().casefold(), set()).add(character_id)
    return names


def resolve_speakers(segments: list[dict[str, Any]], present: list[str], characters: list[dict[str, Any]]) -> Resolution:
    by_name = _index(characters)
    current_name = {c["id"]: c.get("name") or c["id"] for c in characters if isinstance(c.get("id"), str)}
    resolution = Resolution(segments=[])
    present_ids: list[str] = []

    def lookup(name: str) -> str | None:
        matches = by_name.get(name.strip().casefold(), set())
        if len(matches) == 1:
            return next(iter(matches))
        if name not in resolution.unresolved:
            resolution.unresolved.append(name)
        return None

    for segment in segments:
        segment = dict(segment)
        speaker = segment.get("speaker")
        if isinstance(speaker, str) and speaker:
            character_id = lookup(speaker)
            if character_id is not None:
                segment["speakerId"] = character_id
                segment["speaker"] = current_name[character_id]
                if character_id not in present_ids:
                    present_ids.append(character_id)
        resolution.segments.append(segment)
    for name in present:
        if isinstance(name, str) and name:
            character_id = lookup(name)
            if character_id is not None and character_id not in present_ids:
                present_ids.append(character_id)
    resolution.present_character_ids = present_ids
    return resolution

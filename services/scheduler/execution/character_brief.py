"""What a character-actor@1 subagent is sent (spec: 角色委托): the character's name, aliases, description and fields,
the story it witnessed, the caller's brief and instruction, assembled to at most MAX_ASSEMBLED_CHARS. When it is
longer, the oldest witnessed story goes first, then the largest profile fields (never the name); what still does not
fit is refused. The raw brief's own limit (20,000) is checked before this."""

from __future__ import annotations

import json
from typing import Any

from covel.common.v1 import common_pb2
from shared.structs import from_struct

MAX_ASSEMBLED_CHARS = 40_000
PROFILE_KEYS = ("name", "aliases", "description", "fields")


def witnessed_messages(history: list[common_pb2.Message], character_id: str) -> list[common_pb2.Message]:
    """The story messages the character was present for (a story's presentCharacterIds), oldest first."""
    found = []
    for message in history:
        if message.role != "story":
            continue
        present = from_struct(message.metadata).get("presentCharacterIds") or []
        if isinstance(present, list) and character_id in present and message.text.strip():
            found.append(message)
    return found


def witnessed_story(history: list[common_pb2.Message], character_id: str) -> list[str]:
    """The texts of witnessed_messages."""
    return [message.text for message in witnessed_messages(history, character_id)]


def _render(profile: dict[str, Any], witnessed: list[str], brief: str, instruction: str) -> str:
    parts = [f"<character>\n{json.dumps(profile, ensure_ascii=False)}\n</character>"]
    if witnessed:
        parts.append("<witnessed-story>\n" + "\n\n".join(witnessed) + "\n</witnessed-story>")
    parts.append(brief)
    if instruction:
        parts.append(instruction)
    return "\n\n".join(parts)


def character_brief(character: dict[str, Any], witnessed: list[str], brief: str, instruction: Any) -> str | None:
    """The assembled brief, or None when even the name, brief and instruction alone exceed the limit."""
    profile = {key: character[key] for key in PROFILE_KEYS if key in character}
    told = instruction.strip() if isinstance(instruction, str) else ""
    story = list(witnessed)
    text = _render(profile, story, brief, told)
    while len(text) > MAX_ASSEMBLED_CHARS and story:
        story.pop(0)
        text = _render(profile, story, brief, told)
    while len(text) > MAX_ASSEMBLED_CHARS and len(profile) > 1:
        largest = max((key for key in profile if key != "name"), key=lambda key: len(json.dumps(profile[key], ensure_ascii=False)))
        del profile[largest]
        text = _render(profile, story, brief, told)
    return text if len(text) <= MAX_ASSEMBLED_CHARS else None

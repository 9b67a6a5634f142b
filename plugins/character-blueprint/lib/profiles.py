"""character-blueprint's pure rules: who a name means, a profile's media, the profiles' prompt text."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from shared.plugin_sdk.package_files import media_ref

MEDIA_KINDS = ("avatar", "portrait", "voice")


def norm(text: Any) -> str:
    return " ".join(str(text or "").split()).casefold()


def find_character(name: str, characters: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The world character a name means: the whole id, name or an alias (any case), only when one matches."""
    wanted = norm(name)
    if not wanted:
        return None
    characters = list(characters)
    for field in ("id", "name"):
        hits = [c for c in characters if norm(c.get(field)) == wanted]
        if len(hits) == 1:
            return hits[0]
    hits = [c for c in characters if wanted in (norm(a) for a in c.get("aliases") or ())]
    return hits[0] if len(hits) == 1 else None


def media_of(profile: Mapping[str, Any] | None) -> dict[str, dict[str, str]]:
    media = (profile or {}).get("media") or {}
    found = {kind: media_ref(media.get(kind)) for kind in MEDIA_KINDS}
    return {kind: ref for kind, ref in found.items() if ref}


def story_names(story: Mapping[str, Any] | None) -> tuple[list[str], bool]:
    """(names of who the story shows present: cues.present, then speakers; whether the cues named the cast)."""
    story = story or {}
    cues = story.get("cues") if isinstance(story.get("cues"), dict) else {}
    names: list[str] = []
    listed = isinstance(cues.get("present"), list)
    # presentCharacterIds: the kernel's resolution of cues.present and the speakers, where the story has it.
    ids = story.get("presentCharacterIds")
    listed = listed or isinstance(ids, list)
    for name in [*(cues.get("present") or []), *(ids or [])]:
        if isinstance(name, str) and name.strip() and name not in names:
            names.append(name.strip())
    for segment in story.get("segments") or []:
        speaker = segment.get("speaker") if isinstance(segment, dict) else None
        if segment.get("kind") in ("dialogue", "action") and isinstance(speaker, str) and speaker.strip() and speaker.strip() not in names:
            names.append(speaker.strip())
    return names, listed


def mentioned(text: str, candidates: Iterable[tuple[str, Iterable[str]]]) -> list[str]:
    """Ids whose name or an alias the text names as a whole word (any case)."""
    lowered = norm(text)
    found: list[str] = []
    for key, names in candidates:
        for name in names:
            name = norm(name)
            if not name:
                continue
            spaced = name.isascii()
            if (re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", lowered) if spaced else name in lowered) and key not in found:
                found.append(key)
                break
    return found


def profile_line(name: str, profile: Mapping[str, Any], chinese: bool = False, present: bool = False) -> str:
    role = profile.get("role")
    head = f"- {name}, {role}" if role else f"- {name}"
    if present:
        head += "（在场）" if chinese else " (present)"
    labels = (("description", "身份", "Who"), ("appearance", "外貌", "Looks"), ("personality", "性格", "Personality"),
              ("speech", "说话方式", "Speech"))
    parts = [f"{zh if chinese else en}{'：' if chinese else ': '}{' '.join(str(profile[field]).split())}"
             for field, zh, en in labels if profile.get(field)]
    return head + (("：" if chinese else ": ") + ("；" if chinese else "; ").join(parts) if parts else "")


def profiles_segment(data: Mapping[str, Mapping[str, Any]], player_message: str, locale: str, max_profiles: int = 6) -> dict | None:
    """The prompt.segment@1 answer: the profiles of who is present (the `present` records), of whom the
    player's words name, and, before anyone is known to be present, of the world's first characters."""
    profiles = dict(data.get("profiles") or {})
    if not profiles:
        return None
    present = data.get("present") or {}
    roster = data.get("roster") or {}
    names = {key: str((present.get(key) or {}).get("name") or (roster.get(key) or {}).get("name") or profile.get("name")
                      or key.replace("-", " ").title()) for key, profile in profiles.items()}
    chosen = [key for key in sorted(present, key=lambda k: ((present[k] or {}).get("since", 0), k)) if key in profiles]
    aliases = {key: [names[key], key, profiles[key].get("name") or "", *((roster.get(key) or {}).get("aliases") or [])] for key in profiles}
    for key in mentioned(player_message, ((k, aliases[k]) for k in profiles)):
        if key not in chosen:
            chosen.append(key)
    if not chosen:
        chosen = sorted(profiles)
    chosen = chosen[:max(1, int(max_profiles))]
    chinese = str(locale or "").startswith("zh")
    head = ("Characters:（世界预设的人物资料：保持他们的外貌、性格和说话方式）" if chinese
            else "Characters: (their preset profiles; keep their looks, personalities and voices)")
    lines = [head] + [profile_line(names[key], profiles[key], chinese, key in present) for key in chosen]
    return {"id": "profiles", "content": "\n".join(lines), "position": "system"}

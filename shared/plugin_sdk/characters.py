"""Finding characters: who a seat plays, who acts in an action, and which character a name means.

    from shared.plugin_sdk.characters import acting_character_of, current_character_of, resolve_character

    hero = acting_character_of(ctx.playerActions, ctx.world.characters, ctx.world.seats)
    found = resolve_character(ctx.world.characters, "Ossa")   # {"status": "found", "character": …}

Never look for the player by `type == "player"`: a session may have several player characters, and a
seat plays one of them at a time (docs/worlds.md, "Seats").
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

MAIN_SEAT = "main"


def character_name_key(name: str) -> str:
    """The form names are compared in: Unicode-normalised, case-folded, inner spaces collapsed."""
    return " ".join(unicodedata.normalize("NFKC", str(name)).casefold().split())


def seat_character_ids(seat: Mapping[str, Any] | None) -> list[str]:
    """The characters a seat may play."""
    return list((seat or {}).get("characterIds") or [])


def _seat(seats: Iterable[Mapping[str, Any]], seat_id: str) -> Mapping[str, Any] | None:
    return next((seat for seat in seats if seat.get("id") == seat_id), None)


def current_character_of(seats: Sequence[Mapping[str, Any]], characters: Iterable[Mapping[str, Any]],
                         seat_id: str = MAIN_SEAT) -> Mapping[str, Any] | None:
    """The character a seat (the main one unless named) plays now; None when it plays none."""
    wanted = (_seat(seats, seat_id) or {}).get("currentCharacterId")
    return next((c for c in characters if wanted and c.get("id") == wanted), None)


def acting_character_of(player_actions: Sequence[Mapping[str, Any]], characters: Sequence[Mapping[str, Any]],
                        seats: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The character the turn's actions are taken as (the first action with an actor), else the main seat's current one."""
    for action in player_actions:
        actor = action.get("actorId")
        found = next((c for c in characters if actor and c.get("id") == actor), None)
        if found is not None:
            return found
    return current_character_of(seats, characters)


def resolve_character(characters: Sequence[Mapping[str, Any]], name: str) -> dict[str, Any]:
    """A name as a model wrote it → {"status": "found", "character"}, or "ambiguous" (with "candidates") or
    "missing" (with "nearest", the closest name, or None). Matched by id, then name, then alias."""
    wanted = character_name_key(name)
    for matches in (
        [c for c in characters if character_name_key(c.get("id", "")) == wanted],
        [c for c in characters if character_name_key(c.get("name", "")) == wanted],
        [c for c in characters if wanted in (character_name_key(a) for a in c.get("aliases") or [])],
    ):
        if len(matches) == 1:
            return {"status": "found", "character": matches[0]}
        if matches:
            return {"status": "ambiguous", "candidates": list(matches)}
    names = {character_name_key(n): c for c in characters for n in [c.get("name", ""), *(c.get("aliases") or [])] if n}
    close = difflib.get_close_matches(wanted, list(names), n=1, cutoff=0.5)
    return {"status": "missing", "nearest": names[close[0]] if close else None}


def merge_character_aliases(*alias_lists: Iterable[str], name: str = "") -> list[str]:
    """The aliases of several lists as one: in order, each spelling once (compared by character_name_key), without the
    character's own `name`."""
    seen = {character_name_key(name)} if name else set()
    merged = []
    for aliases in alias_lists:
        for alias in aliases or []:
            key = character_name_key(alias) if isinstance(alias, str) else ""
            if key and key not in seen:
                seen.add(key)
                merged.append(alias.strip())
    return merged


def _spaced(name: str) -> bool:
    """A name of a script written with spaces between words (its hits need word boundaries)."""
    return any(char.isascii() and char.isalpha() for char in name)


def mentioned_character_ids(text: str, characters: Sequence[Mapping[str, Any]]) -> list[str]:
    """The ids of the characters `text` names (by name or alias), in the order they first appear. A space-separated
    name needs word boundaries (Rin is not in spring); a hit inside another character's longer hit does not count
    (会长 is not in 副会长)."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    hits: list[tuple[int, int, str]] = []
    for character in characters:
        for name in [character.get("name", ""), *(character.get("aliases") or [])]:
            key = character_name_key(name) if isinstance(name, str) else ""
            if not key:
                continue
            pattern = rf"(?<!\w){re.escape(key)}(?!\w)" if _spaced(key) else re.escape(key)
            hits.extend((m.start(), m.end(), str(character.get("id"))) for m in re.finditer(pattern, folded))
    kept = [hit for hit in hits if not any(other[2] != hit[2] and other[0] <= hit[0] and hit[1] <= other[1]
                                           and other[1] - other[0] > hit[1] - hit[0] for other in hits)]
    ordered: list[str] = []
    for _, _, character_id in sorted(kept):
        if character_id not in ordered:
            ordered.append(character_id)
    return ordered

"""The SDK's character helpers (shared/plugin_sdk/characters.py): who a seat plays, who acts, and which
character a name a model wrote means."""

from __future__ import annotations

from shared.plugin_sdk.characters import acting_character_of, current_character_of, resolve_character, seat_character_ids

CHARACTERS = [{"id": "aya", "name": "Aya", "type": "player"}, {"id": "bram", "name": "Bram", "type": "player", "aliases": ["Brammy"]},
              {"id": "ossa", "name": "Ossa the Drowned", "aliases": ["Ossa", "奥莎"]}, {"id": "twin-a", "name": "Twin"},
              {"id": "twin-b", "name": "twin"}]
SEATS = [{"id": "main", "role": "player", "currentCharacterId": "aya", "characterIds": ["aya", "bram"]},
         {"id": "gm", "role": "director", "currentCharacterId": None, "characterIds": []}]


def test_the_seat_and_the_actions_say_who_acts() -> None:
    assert current_character_of(SEATS, CHARACTERS)["id"] == "aya"
    assert current_character_of(SEATS, CHARACTERS, "gm") is None and seat_character_ids(SEATS[0]) == ["aya", "bram"]
    assert acting_character_of([{"kind": "act", "actorId": "bram"}], CHARACTERS, SEATS)["id"] == "bram"
    assert acting_character_of([{"kind": "narrate"}], CHARACTERS, SEATS)["id"] == "aya"


def test_a_name_resolves_by_id_name_then_alias_or_says_why_not() -> None:
    assert resolve_character(CHARACTERS, "BRAM")["character"]["id"] == "bram"
    assert resolve_character(CHARACTERS, " ossa ")["character"]["id"] == "ossa"
    assert resolve_character(CHARACTERS, "奥莎")["character"]["id"] == "ossa"
    ambiguous = resolve_character(CHARACTERS, "twin")
    assert ambiguous["status"] == "ambiguous" and [c["id"] for c in ambiguous["candidates"]] == ["twin-a", "twin-b"]
    missing = resolve_character(CHARACTERS, "Brammie")
    assert missing["status"] == "missing" and missing["nearest"]["id"] == "bram"
    assert resolve_character(CHARACTERS, "Zed") == {"status": "missing", "nearest": None}

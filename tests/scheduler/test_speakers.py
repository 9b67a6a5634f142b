from services.scheduler.turn.speakers import resolve_speakers

CHARACTERS = [
    {"id": "npc-mira", "name": "Mira", "aliases": ["the harbor-master"]},
    {"id": "npc-tobin", "name": "Old Tobin"},
    {"id": "npc-twin-a", "name": "Ash"},
    {"id": "npc-twin-b", "name": "Ash"},
]


def test_full_id_name_or_alias_resolve_and_others_are_listed() -> None:
    segments = [
        {"kind": "dialogue", "speaker": "the Harbor-Master", "text": "Welcome."},
        {"kind": "dialogue", "speaker": "npc-tobin", "text": "Ale?"},
        {"kind": "dialogue", "speaker": "Tob", "text": "partial names never match"},
        {"kind": "dialogue", "speaker": "Ash", "text": "two characters share it"},
        {"kind": "narration", "text": "Rain."},
    ]
    resolution = resolve_speakers(segments, ["Mira", "Stranger"], CHARACTERS)
    assert [s.get("speakerId") for s in resolution.segments] == ["npc-mira", "npc-tobin", None, None, None]
    assert resolution.segments[0]["speaker"] == "Mira" and resolution.segments[1]["speaker"] == "Old Tobin"
    assert resolution.present_character_ids == ["npc-mira", "npc-tobin"]
    assert resolution.unresolved == ["Tob", "Ash", "Stranger"]

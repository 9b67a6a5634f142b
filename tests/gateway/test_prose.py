"""The scripted model's prose helpers (services/gateway/providers/scripted/prose.py)."""

from __future__ import annotations

import pytest

from services.gateway.providers.scripted.prose import is_intention, is_speech, recollection, rotating, second_person, spoken


@pytest.mark.parametrize(("record", "line"), [
    ("Mira. also called 米拉. npc. The harbor-master. Sharp, tired.", "You think of Mira, the harbor-master. Sharp, tired."),
    ("The Drowned Lantern: The harbor inn, kept by Old Tobin.", "You think of the Drowned Lantern: the harbor inn, kept by Old Tobin."),
    ("The player chose to pick up the rusty key.", "You remember: The player chose to pick up the rusty key."),
    # The player's own character is nothing to remember; a record of markers only neither.
    ("The traveller. also called 旅人. player. The player's character, off the evening coach..", ""),
    ("npc. also called x.", ""),
])
def test_a_memory_record_becomes_a_sentence_without_its_markers(record: str, line: str) -> None:
    assert recollection(record, english=True) == line


def test_the_players_words_turn_to_the_second_person() -> None:
    assert second_person("promise Mira I will find my boats, and I'm sure of it") == "promise Mira you will find your boats, and you're sure of it"


@pytest.mark.parametrize(("text", "speech"), [
    ("Evening, Sela.", True), ("Where is the keeper?", True), ("\u201cWait!\u201d", True),
    ("I look around.", False), ("open the door", False), ("At dusk I climb the path.", False),
])
def test_a_line_said_is_told_as_speech(text: str, speech: bool) -> None:
    assert is_speech(text) is speech
    assert spoken("Evening, Sela.") == "You say, \u201cEvening, Sela.\u201d"


def test_an_intention_is_no_deed() -> None:
    text = "I pick up the key. Then I will find the boats."
    assert not is_intention(text, text.index("pick")) and is_intention(text, text.index("find"))


def test_a_rotation_never_gives_the_same_option_two_turns_running() -> None:
    options = ("a", "b", "c")
    picks = [rotating(options, 7, turn) for turn in range(6)]
    assert all(one != two for one, two in zip(picks, picks[1:], strict=False)) and set(picks) == set(options)

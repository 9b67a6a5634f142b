"""ctx.history_for (execution/character_history.py): the newest witnessed story, oldest first, and clear refusals."""

from __future__ import annotations

import pytest

from covel.common.v1 import common_pb2
from services.scheduler.execution.character_history import MOST, character_history
from shared.structs import to_struct

CHARACTERS = [{"id": "mira"}, {"id": "tobin"}]


def story(seq: int, present: list[str]) -> common_pb2.Message:
    return common_pb2.Message(role="story", seq=seq, turn_id=f"t{seq}", text=f"story {seq}",
                              metadata=to_struct({"presentCharacterIds": present}))


HISTORY = [story(1, ["mira"]), common_pb2.Message(role="player", seq=2, text="hello mira"), story(3, ["tobin"]),
           story(4, ["mira", "tobin"]), story(5, ["mira"])]


def test_the_newest_witnessed_stories_oldest_first() -> None:
    assert character_history(HISTORY, CHARACTERS, "mira", 2) == {
        "characterId": "mira", "entries": [{"turnId": "t4", "seq": 4, "text": "story 4"}, {"turnId": "t5", "seq": 5, "text": "story 5"}],
        "more": True}
    assert [e["seq"] for e in character_history(HISTORY, CHARACTERS, "tobin")["entries"]] == [3, 4]


@pytest.mark.parametrize(("character_id", "limit", "error"), [
    ("", None, ValueError), ("mira", 0, ValueError), ("mira", MOST + 1, ValueError), ("mira", True, ValueError),
    ("ghost", None, LookupError)])
def test_bad_arguments_are_refused(character_id, limit, error) -> None:
    with pytest.raises(error):
        character_history(HISTORY, CHARACTERS, character_id, limit)

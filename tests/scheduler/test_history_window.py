"""agent.history.maxTurns counts turns by their turn id (divergence 2 of issue 40): a continuation turn without a
player message is a turn, a turn with two player messages is one turn; 0 sends no earlier turn."""

from __future__ import annotations

from covel.common.v1 import common_pb2
from services.scheduler.agent.context import assemble, history_messages
from tests.scheduler.agent_harness import runtime


def log(*entries: tuple[str, str, str]) -> list[common_pb2.Message]:
    return [common_pb2.Message(seq=seq, turn_id=turn, role=role, text=text) for seq, (turn, role, text) in enumerate(entries, start=1)]


HISTORY = log(("t1", "player", "I knock."), ("t1", "story", "The door opens."),
              ("t2", "story", "A draught blows the candle out."),  # a continuation turn: no player message
              ("t3", "player", "I light it."), ("t3", "player", "And I look around."), ("t3", "story", "Shelves of jars."))


def test_the_window_counts_turn_ids() -> None:
    assert [m["content"] for m in history_messages(HISTORY, 1)] == ["I light it.", "And I look around.", "Shelves of jars."]
    assert [m["content"] for m in history_messages(HISTORY, 2)][0] == "A draught blows the candle out."
    assert len(history_messages(HISTORY, 3)) == len(history_messages(HISTORY, 10)) == 6


def test_max_turns_zero_sends_no_earlier_turn_but_the_current_input() -> None:
    _, messages = assemble(runtime(), "en", False, HISTORY, "I open a jar.", max_turns=0)
    assert [m["content"] for m in messages if m["role"] != "system"] == ["I open a jar."]

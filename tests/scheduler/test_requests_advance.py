"""Which committed turn asks for the next one (auto-advance)."""

from __future__ import annotations

from covel.store.v1 import store_pb2
from services.scheduler.turn.outcome import requests_advance
from shared.structs import to_struct


def _turn_with_stories(*yields: str) -> store_pb2.Turn:
    turn = store_pb2.Turn(status=store_pb2.TURN_STATUS_COMMITTED)
    for value in yields:
        turn.messages.add(role="story", text="…", metadata=to_struct({"yield": value}))
    return turn


def test_exactly_one_committed_story_yielding_continue_advances() -> None:
    assert requests_advance(_turn_with_stories("continue"))
    assert not requests_advance(_turn_with_stories("continue", "continue")), "two stories hand control back to the player"
    assert not requests_advance(_turn_with_stories("continue", "user"))
    assert not requests_advance(_turn_with_stories("user"))
    assert not requests_advance(_turn_with_stories())
    failed = _turn_with_stories("continue")
    failed.status = store_pb2.TURN_STATUS_FAILED
    assert not requests_advance(failed)

"""Which turn events join into one SubmitActions message (services/scheduler/turn/event_coalescing.py)."""

from __future__ import annotations

import asyncio

from covel.common.v1 import common_pb2
from covel.scheduler.internal.v1 import turn_events_pb2
from services.scheduler.agent.story_stream import PARAGRAPH_BREAK
from services.scheduler.turn.event_coalescing import how_held, join_story_text
from shared.stream_coalescing import MAX_JOINED_CHARS, Channel, Coalescer


def text(value: str, runtime_id: str = "narrator", kind: str = "", speaker: str = "", reset: bool = False) -> turn_events_pb2.TurnEvent:
    segment = common_pb2.Segment(kind=kind, speaker=speaker) if kind else None
    return turn_events_pb2.TurnEvent(narrative_delta=turn_events_pb2.NarrativeDelta(
        runtime_id=runtime_id, text=value, segment=segment, reset=reset))


def finished(runtime_id: str = "narrator") -> turn_events_pb2.TurnEvent:
    return turn_events_pb2.TurnEvent(runtime_finished=turn_events_pb2.RuntimeFinished(runtime_id=runtime_id, status="success"))


def sent(events: list[turn_events_pb2.TurnEvent]) -> list[tuple[str, str]]:
    channel: Channel[turn_events_pb2.TurnEvent] = Channel()
    for event in events:
        channel.put(event)
    channel.close()

    async def read() -> list[turn_events_pb2.TurnEvent]:
        return [event async for event in Coalescer(channel, join_story_text, how_held).items()]

    out = asyncio.run(read())
    return [(e.WhichOneof("event"), e.narrative_delta.text if e.HasField("narrative_delta") else "") for e in out]


def test_text_of_one_runtime_and_segment_joins() -> None:
    joined = join_story_text(text("The door ", kind="dialogue", speaker="Mara"), text("creaks.", kind="dialogue", speaker="Mara"))
    assert joined is not None
    assert joined.narrative_delta.text == "The door creaks."
    assert (joined.narrative_delta.segment.kind, joined.narrative_delta.segment.speaker) == ("dialogue", "Mara")


def test_other_runtimes_segments_breaks_resets_and_events_stay_apart() -> None:
    assert join_story_text(text("a"), text("b", runtime_id="bard")) is None
    assert join_story_text(text("a", kind="narration"), text("b", kind="dialogue", speaker="Mara")) is None
    assert join_story_text(text("a", kind="dialogue", speaker="Mara"), text("b", kind="dialogue", speaker="Tom")) is None
    assert join_story_text(text("a"), text("b", kind="narration")) is None
    assert join_story_text(text("a"), text(PARAGRAPH_BREAK)) is None
    assert join_story_text(text(PARAGRAPH_BREAK), text("b")) is None
    assert join_story_text(text("a"), text("", reset=True)) is None
    assert join_story_text(text("a"), finished()) is None
    assert join_story_text(text("x" * MAX_JOINED_CHARS), text("y")) is None


def test_a_stream_keeps_the_order_of_everything_but_joined_text() -> None:
    events = [text("Rain "), text("falls."), text(PARAGRAPH_BREAK), text("Mara ", kind="dialogue", speaker="Mara"),
              text("speaks.", kind="dialogue", speaker="Mara"), text("", reset=True), text("Again."), finished(), text("late")]
    assert sent(events) == [
        ("narrative_delta", "Rain falls."), ("narrative_delta", PARAGRAPH_BREAK), ("narrative_delta", "Mara speaks."),
        ("narrative_delta", ""), ("narrative_delta", "Again."), ("runtime_finished", ""), ("narrative_delta", "late"),
    ]

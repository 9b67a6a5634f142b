"""Which turn events a stream that asked for batches sends as one message (shared/stream_batching.py,
turn/event_coalescing.py's how_batched)."""

from __future__ import annotations

import asyncio

from covel.scheduler.internal.v1 import turn_events_pb2
from services.scheduler.agent.story_stream import PARAGRAPH_BREAK
from services.scheduler.turn.event_coalescing import how_batched, how_held, join_story_text
from shared.stream_batching import BATCHED, Batcher
from shared.stream_coalescing import Channel, Coalescer
from tests.scheduler.test_event_coalescing import finished, text

TurnEvent = turn_events_pb2.TurnEvent


def started(runtime_id: str = "narrator") -> TurnEvent:
    return TurnEvent(runtime_started=turn_events_pb2.RuntimeStarted(runtime_id=runtime_id, stage="story"))


def turn_started() -> TurnEvent:
    return TurnEvent(turn_started=turn_events_pb2.TurnStarted(turn_id="t1"))


def shown(event: TurnEvent) -> tuple[str, str]:
    kind = event.WhichOneof("event") or ""
    return kind, event.narrative_delta.text if kind == "narrative_delta" else ""


def batcher(channel: Channel[TurnEvent], *, batch_interval_s: float = 60.0, max_items: int = 256) -> Batcher[TurnEvent]:
    return Batcher(channel, join_story_text, how_batched, batch_interval_s=batch_interval_s, max_items=max_items)


def all_at_once(events: list[TurnEvent], **options) -> list[list[tuple[str, str]]]:
    channel: Channel[TurnEvent] = Channel()
    for event in events:
        channel.put(event)
    channel.close()

    async def read() -> list[list[TurnEvent]]:
        return [list(batch) async for batch in batcher(channel, **options).batches()]

    return [[shown(event) for event in batch] for batch in asyncio.run(read())]


def coalesced(events: list[TurnEvent]) -> list[tuple[str, str]]:
    channel: Channel[TurnEvent] = Channel()
    for event in events:
        channel.put(event)
    channel.close()

    async def read() -> list[TurnEvent]:
        return [event async for event in Coalescer(channel, join_story_text, how_held).items()]

    return [shown(event) for event in asyncio.run(read())]


STORY = [turn_started(), started(), started("memory"), text("Rain "), text("falls."), text(PARAGRAPH_BREAK),
         text("Mara ", kind="dialogue", speaker="Mara"), text("speaks.", kind="dialogue", speaker="Mara"),
         text("", reset=True), text("Again."), finished("memory"), finished(), text("late")]


def test_bookkeeping_waits_for_company_and_story_text_does_not() -> None:
    assert how_batched(started()) == how_batched(finished()) == BATCHED
    assert how_batched(text("a")) == how_held(text("a"))
    assert how_batched(turn_started()) == how_held(turn_started())


def test_what_is_ready_together_is_one_batch_of_the_same_events_in_order() -> None:
    (batch,) = all_at_once(STORY)
    # Flattened, the batches are exactly the stream a client that did not ask for them gets.
    assert batch == coalesced(STORY)


def test_a_batch_holds_at_most_max_items() -> None:
    batches = all_at_once([started(str(n)) for n in range(5)], max_items=2)
    assert [len(batch) for batch in batches] == [2, 2, 1]


def test_story_text_goes_at_once_with_the_bookkeeping_before_it() -> None:
    async def play() -> list[list[tuple[str, str]]]:
        channel: Channel[TurnEvent] = Channel()
        stream = batcher(channel).batches()
        channel.put(started())
        channel.put(started("memory"))
        first = asyncio.ensure_future(anext(stream))
        # The starts wait (the batch interval is a minute) ...
        done, _ = await asyncio.wait({first}, timeout=0.2)
        assert not done
        # ... until story text comes: it goes at once, and they ride with it.
        channel.put(text("Rain."))
        batches = [await asyncio.wait_for(first, 30)]
        channel.put(finished())
        channel.close()
        batches += [batch async for batch in stream]
        return [[shown(event) for event in batch] for batch in batches]

    assert asyncio.run(play()) == [[("runtime_started", ""), ("runtime_started", ""), ("narrative_delta", "Rain.")],
                                   [("runtime_finished", "")]]


def test_bookkeeping_alone_goes_after_the_batch_interval() -> None:
    async def play() -> list[tuple[str, str]]:
        channel: Channel[TurnEvent] = Channel()
        stream = batcher(channel, batch_interval_s=0.01).batches()
        channel.put(finished())
        # Nothing else comes: the finish goes on its own (no close, no later event needed).
        batch = await asyncio.wait_for(anext(stream), 30)
        return [shown(event) for event in batch]

    assert asyncio.run(play()) == [("runtime_finished", "")]


def test_unsent_is_what_was_taken_but_not_delivered() -> None:
    async def play() -> tuple[list[TurnEvent], list[TurnEvent]]:
        channel: Channel[TurnEvent] = Channel()
        batches = batcher(channel)
        stream = batches.batches()
        channel.put(started())
        channel.put(text("Rain."))
        sending = await asyncio.wait_for(anext(stream), 30)
        channel.put(started("memory"))
        waiting = asyncio.ensure_future(anext(stream))
        await asyncio.wait({waiting}, timeout=0.05)
        unsent = batches.unsent()
        waiting.cancel()
        return sending, unsent

    sending, unsent = asyncio.run(play())
    assert [shown(event) for event in sending] == [("runtime_started", ""), ("narrative_delta", "Rain.")]
    # The batch yielded was taken up by the consumer when it asked for the next; the start waiting is unsent.
    assert [shown(event) for event in unsent] == [("runtime_started", "")]

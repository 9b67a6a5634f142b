"""Reading a turn stream that asked for batches (SubmitActionsRequest.batch_events, docs/api.md "Batched events"):
a message is one event or a batch of them, and a reader wants the events, in order."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Sequence

from covel.scheduler.v1 import scheduler_pb2


def events_of(message: scheduler_pb2.TurnEvent) -> Sequence[scheduler_pb2.TurnEvent]:
    """The events one message carries: a batch's, or the message itself."""
    return message.batch.events if message.WhichOneof("event") == "batch" else (message,)


async def each_event(stream: AsyncIterable[scheduler_pb2.TurnEvent]) -> AsyncIterator[scheduler_pb2.TurnEvent]:
    """A stream's events one at a time, batches opened."""
    async for message in stream:
        for event in events_of(message):
            yield event

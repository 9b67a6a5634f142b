"""A turn's work run as a task of its own and streamed to its client. The task outlives a client that goes
away, so a turn always commits whole; story text emitted at once goes as one message, and a client that asked
for batches gets the events that are ready together as one (turn/event_coalescing.py); WatchTurn reads every
streamed turn again (turn_watch.py)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from functools import partial
from typing import Generic, TypeVar

from covel.scheduler.internal.v1 import turn_events_pb2
from covel.scheduler.v1 import scheduler_pb2
from covel.store.v1 import store_pb2
from services.scheduler.api.turn_watch import TurnWatch
from services.scheduler.hooks.event_keys import SchedulerEventKeys
from services.scheduler.public_api import convert
from services.scheduler.turn.concealment import conceal_turn
from services.scheduler.turn.event_coalescing import how_batched, how_held, is_story_text, join_story_text
from services.scheduler.turn.request import TurnRequest
from services.scheduler.turn.runner import TurnRunner
from services.scheduler.turn.stream import Emit
from shared.errors import unavailable
from shared.logs import get_logger
from shared.stream_batching import BATCH_INTERVAL_S, Batcher
from shared.stream_coalescing import Channel, Coalescer

log = get_logger(component="scheduler")
T = TypeVar("T")
Work = Callable[[Emit], Awaitable[T]]
# What a stream passes each event to for WatchTurn, and what it calls once it ends (TurnWatch.tap).
Tap = tuple[Callable[[turn_events_pb2.TurnEvent], None], Callable[[], None]]
GONE = "the client went away before the story was delivered"


class TurnStreams:
    def __init__(self, runner: TurnRunner, events: SchedulerEventKeys, *, batch_interval_s: float = BATCH_INTERVAL_S) -> None:
        self._runner = runner
        self._events = events
        self._batch_interval_s = batch_interval_s
        # Turns keep running when their client goes away; shutdown waits for them.
        self.in_flight: set[asyncio.Task] = set()
        self.watch = TurnWatch()

    async def run(self, turn_request: TurnRequest, emit: Emit) -> store_pb2.Turn:
        return await self._runner.run_observed(turn_request, emit)

    def start(self, work: Work[T], *, session_id: str) -> Streamed[T]:
        """`work(emit)` started as its own task; what it emits is the returned stream's."""
        streamed = Streamed(work, self.watch.tap(session_id), self._events, self._batch_interval_s)
        self.in_flight.add(streamed.task)
        streamed.task.add_done_callback(self.in_flight.discard)
        streamed.task.add_done_callback(_log_failure)
        return streamed

    async def one_turn(self, turn_request: TurnRequest, *, background: bool = False) -> AsyncIterator[scheduler_pb2.TurnEvent]:
        """One turn streamed to its record; `background` ends the stream after turn_started."""
        streamed = self.start(partial(self._completed_turn, turn_request), session_id=turn_request.session_id)
        async for event in streamed.events(background=background):
            yield event

    async def _completed_turn(self, turn_request: TurnRequest, emit: Emit) -> None:
        await send_completed(emit, await self.run(turn_request, emit))


class Streamed(Generic[T]):
    """One work's task and the events it emits, delivered to the client while it listens."""

    def __init__(self, work: Work[T], tap: Tap, events: SchedulerEventKeys, batch_interval_s: float = BATCH_INTERVAL_S) -> None:
        self._channel: Channel[turn_events_pb2.TurnEvent] = Channel()
        self._publish, self._finished = tap
        self._events = events
        self._batch_interval_s = batch_interval_s
        # Set once the client went away: every story completed from then on is reported undelivered.
        self._gone = ""
        self.task: asyncio.Task[T] = asyncio.create_task(self._run(work))

    async def _run(self, work: Work[T]) -> T:
        try:
            return await work(self._put)
        finally:
            self._finished()
            self._channel.close()

    async def _put(self, event: turn_events_pb2.TurnEvent) -> None:
        self._publish(event)
        if self._gone:
            self._undelivered(event)
        elif self._channel.put(event) and is_story_text(event):
            # The stream was idle: it sends this text now, not once the turn next waits (after the
            # last model message that may be a while: output checks, hooks, the commit).
            await asyncio.sleep(0)

    def _undelivered(self, event: turn_events_pb2.TurnEvent) -> None:
        if event.WhichOneof("event") == "turn_completed":
            self._events.message_sent(event.turn_completed, False, self._gone)

    async def events(self, *, background: bool = False, batched: bool = False) -> AsyncIterator[scheduler_pb2.TurnEvent]:
        """The events as the client gets them (`batched`: those ready together as one message); then the work's
        error, if any, raised as the RPC's status."""
        stream = _Batches(self._channel, self._batch_interval_s) if batched else _Singles(self._channel)
        try:
            async with contextlib.aclosing(stream.messages()) as messages:
                async for events in messages:
                    yield _message(events)
                    stream.delivered()
                    for event in events:
                        if event.WhichOneof("event") == "turn_completed":
                            self._events.message_sent(event.turn_completed, True)
                    if background and any(event.WhichOneof("event") == "turn_started" for event in events):
                        return
        except BaseException:
            # The client went away (while waiting or while being sent an event); the turn goes on.
            self._gone = GONE
            for unsent in [*stream.unsent(), *self._channel.drain()]:
                self._undelivered(unsent)
            raise
        await self.task

    def outcome(self) -> T:
        """What the work returned (once `events` ended without an error)."""
        return self.task.result()


class _Singles:
    """One event a message, story text ready at once joined (the stream of a client that did not ask for batches)."""

    def __init__(self, channel: Channel[turn_events_pb2.TurnEvent]) -> None:
        self._coalescer = Coalescer(channel, join_story_text, how_held)
        self._delivering: turn_events_pb2.TurnEvent | None = None

    async def messages(self) -> AsyncGenerator[list[turn_events_pb2.TurnEvent], None]:
        async with contextlib.aclosing(self._coalescer.items()) as coalesced:
            async for event in coalesced:
                self._delivering = event
                yield [event]

    def delivered(self) -> None:
        self._delivering = None

    def unsent(self) -> list[turn_events_pb2.TurnEvent]:
        return [*([self._delivering] if self._delivering is not None else []), *self._coalescer.unsent()]


class _Batches:
    """The events ready together as one message (a request's batch_events)."""

    def __init__(self, channel: Channel[turn_events_pb2.TurnEvent], batch_interval_s: float) -> None:
        self._batcher = Batcher(channel, join_story_text, how_batched, batch_interval_s=batch_interval_s)

    def messages(self) -> AsyncGenerator[list[turn_events_pb2.TurnEvent], None]:
        return self._batcher.batches()

    def delivered(self) -> None:
        self._batcher.sending = []

    def unsent(self) -> list[turn_events_pb2.TurnEvent]:
        return self._batcher.unsent()


def _message(events: list[turn_events_pb2.TurnEvent]) -> scheduler_pb2.TurnEvent:
    """One event as itself; several as a batch."""
    if len(events) == 1:
        return convert(events[0], scheduler_pb2.TurnEvent)
    return convert(turn_events_pb2.TurnEvent(batch=turn_events_pb2.TurnEventBatch(events=events)), scheduler_pb2.TurnEvent)


async def send_completed(emit: Emit, turn: store_pb2.Turn) -> None:
    """The turn's record to the client; a retryable failure then ends the stream UNAVAILABLE with RetryInfo,
    so a client tells it from a failure another try would meet again (docs/retries.md)."""
    await emit(turn_events_pb2.TurnEvent(turn_completed=conceal_turn(turn)))
    if turn.retryable:
        raise unavailable(f"turn {turn.id} failed for a passing reason ({turn.abort_reason}); send it again with the same "
                          "idempotency_key and it runs again", reason="TURN_FAILED_RETRYABLE", turn_id=turn.id)


def _log_failure(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("turn.failed", error=repr(task.exception()))

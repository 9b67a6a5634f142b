"""Server streams send what is ready at once as one message (issue 19).

A stream's producer puts items into a `Channel`; `coalesce` yields them, joining consecutive items
that the stream's `join` accepts (text deltas of the same source). Text never waits long: text that
follows another kind of message goes as soon as nothing more is ready, and text that follows text
waits at most `STREAM_FLUSH_INTERVAL_S` for more. Items that are not text (tool calls, the final
reply, a runtime finishing) are never held behind text: held text goes first, then they go.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Generic, TypeVar

T = TypeVar("T")

# How long text that follows text may wait for more: short, so the player sees no delay.
STREAM_FLUSH_INTERVAL_S = 0.005
# A joined message holds at most this many characters of text; longer runs go as several messages.
MAX_JOINED_CHARS = 16 * 1024

# What a stream may do with an item: never hold it, join it only with what is ready at once, or
# (text) also wait up to the flush interval for more.
NEVER, READY_AT_ONCE, FLUSH_INTERVAL = "never", "ready-at-once", "flush-interval"


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class Channel(Generic[T]):
    """An unbounded queue for one consumer, closed by the producer (with the error it failed with, if any)."""

    def __init__(self) -> None:
        self._items: deque[T] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self.closed = False
        self.error: BaseException | None = None

    def put(self, item: T) -> bool:
        """Queue `item`; True when the consumer was waiting for one (it runs once the producer lets it)."""
        self._items.append(item)
        waiter = self._waiter
        if waiter is None or waiter.done():
            return False
        _wake(waiter)
        return True

    def close(self, error: BaseException | None = None) -> None:
        self.closed, self.error = True, error
        if self._waiter is not None:
            _wake(self._waiter)

    def __len__(self) -> int:
        return len(self._items)

    def take(self) -> T:
        return self._items.popleft()

    def drain(self) -> list[T]:
        items = list(self._items)
        self._items.clear()
        return items

    async def wait(self, timeout_s: float | None = None) -> None:
        """Until an item is there, the channel is closed or `timeout_s` has passed."""
        if self._items or self.closed:
            return
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        timer = loop.call_later(timeout_s, _wake, waiter) if timeout_s is not None else None
        try:
            await waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()


class Coalescer(Generic[T]):
    """Yields a channel's items with runs joined; `unsent()` are those taken from the channel but not yet yielded."""

    def __init__(self, channel: Channel[T], join: Callable[[T, T], T | None], hold: Callable[[T], str],
                 flush_interval_s: float = STREAM_FLUSH_INTERVAL_S) -> None:
        self.channel = channel
        self.join = join
        self.hold = hold
        self.flush_interval_s = flush_interval_s
        self.held: T | None = None
        # Taken while the held item it did not join is being yielded.
        self.taken: T | None = None

    def unsent(self) -> list[T]:
        return [item for item in (self.held, self.taken) if item is not None]

    async def items(self) -> AsyncGenerator[T, None]:
        channel = self.channel
        held_until = 0.0
        after_text = False
        while True:
            held = self.held
            if held is None:
                await channel.wait()
            elif not channel and (wait := held_until - time.monotonic()) > 0:
                await channel.wait(wait)
            if not channel:
                if held is not None:
                    # Nothing more came in time: the held item goes.
                    self.held = None
                    after_text = self.hold(held) == FLUSH_INTERVAL
                    yield held
                    continue
                if channel.closed:
                    if channel.error is not None:
                        raise channel.error
                    return
                continue
            item = channel.take()
            if held is not None:
                joined = self.join(held, item)
                if joined is not None:
                    self.held = joined
                    continue
                self.held, self.taken = None, item
                after_text = self.hold(held) == FLUSH_INTERVAL
                yield held
                self.taken = None
            how = self.hold(item)
            if how == NEVER:
                after_text = False
                yield item
                continue
            self.held = item
            # Text after text may wait for more; the first text after anything else goes when nothing more is ready.
            waits = how == FLUSH_INTERVAL and after_text
            held_until = time.monotonic() + self.flush_interval_s if waits else 0.0


def coalesce(channel: Channel[T], join: Callable[[T, T], T | None], hold: Callable[[T], str],
             flush_interval_s: float = STREAM_FLUSH_INTERVAL_S) -> AsyncIterator[T]:
    return Coalescer(channel, join, hold, flush_interval_s).items()


async def coalesce_source(source: AsyncIterator[T], join: Callable[[T, T], T | None], hold: Callable[[T], str],
                          flush_interval_s: float = STREAM_FLUSH_INTERVAL_S) -> AsyncIterator[T]:
    """`coalesce` over an async iterator, which runs as a task of its own so that what it produces
    while a message is being sent is ready at once. Its error is raised after the items before it;
    the task is cancelled when the consumer stops early."""
    channel: Channel[T] = Channel()

    async def pump() -> None:
        try:
            async for item in source:
                channel.put(item)
        except Exception as error:
            channel.close(error)
        else:
            channel.close()

    task = asyncio.create_task(pump())
    try:
        async for item in coalesce(channel, join, hold, flush_interval_s):
            yield item
    finally:
        if not task.done():
            task.cancel()
            # Its source's cleanup (closing a provider's HTTP stream) runs before this stream ends.
            await asyncio.wait({task})

"""A server stream that sends what is ready together as one message: a batch of items (issue 39).

The form a client opts into where a stream would otherwise send one item a message (shared/stream_coalescing.py).
Each item says how long it may wait for company (`hold`, in the coalescing's words): an item that is never held
(NEVER, READY_AT_ONCE) goes once nothing more is ready; text that follows text (FLUSH_INTERVAL) may wait the
flush interval for more of itself, text after anything else does not wait; bookkeeping (BATCHED) may wait the
batch interval for the next message. A batch goes when the first of its items is due, so nothing waits longer
than it would alone, and what waits rides with it. Consecutive items the stream's `join` accepts join as before.
"""

from __future__ import annotations

import math
import time
from collections.abc import AsyncGenerator, Callable
from typing import Generic, TypeVar

from shared.stream_coalescing import FLUSH_INTERVAL, STREAM_FLUSH_INTERVAL_S, Channel

T = TypeVar("T")

# What may wait for the next message (a runtime starting or finishing): at most this long.
BATCH_INTERVAL_S = 0.05
# A batch holds at most this many items; more that are ready go in the next.
MAX_BATCH_ITEMS = 256
BATCHED = "batched"


class Batcher(Generic[T]):
    """Yields a channel's items as batches; `unsent()` are those taken from the channel but not yet delivered."""

    def __init__(self, channel: Channel[T], join: Callable[[T, T], T | None], hold: Callable[[T], str], *,
                 flush_interval_s: float = STREAM_FLUSH_INTERVAL_S, batch_interval_s: float = BATCH_INTERVAL_S,
                 max_items: int = MAX_BATCH_ITEMS) -> None:
        self.channel = channel
        self.join = join
        self.hold = hold
        self.flush_interval_s = flush_interval_s
        self.batch_interval_s = batch_interval_s
        self.max_items = max_items
        self.batch: list[T] = []
        # The batch being yielded, until the consumer asks for the next.
        self.sending: list[T] = []
        self._due = math.inf
        self._after_text = False

    def unsent(self) -> list[T]:
        return [*self.sending, *self.batch]

    def _wait_s(self, item: T) -> float:
        how = self.hold(item)
        if how == BATCHED:
            return self.batch_interval_s
        return self.flush_interval_s if how == FLUSH_INTERVAL and self._after_text else 0.0

    def _add(self, item: T) -> None:
        if self.batch:
            joined = self.join(self.batch[-1], item)
            if joined is not None:
                self.batch[-1] = joined
                return
        else:
            self._due = math.inf
        self.batch.append(item)
        self._due = min(self._due, time.monotonic() + self._wait_s(item))

    def _goes(self) -> bool:
        return len(self.batch) >= self.max_items or self.channel.closed or time.monotonic() >= self._due

    async def batches(self) -> AsyncGenerator[list[T], None]:
        channel = self.channel
        while True:
            if channel and len(self.batch) < self.max_items:
                self._add(channel.take())
            elif self.batch and self._goes():
                self.sending, self.batch = self.batch, []
                self._after_text = self.hold(self.sending[-1]) == FLUSH_INTERVAL
                yield self.sending
                self.sending = []
            elif self.batch:
                await channel.wait(self._due - time.monotonic())
            elif channel.closed:
                if channel.error is not None:
                    raise channel.error
                return
            else:
                await channel.wait()

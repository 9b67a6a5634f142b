"""run_model_stream answers kept open for the scheduler to read as they come (StreamModelAnswer).

PreLLMCall (turn_hooks.run_model): when no run_model answered and a run_model_stream impl gives a stream,
`open_answer` starts reading it and waits up to FIRST_EVENT_WAIT_S for its first event:

| the first event                        | PreLLMCall answers                                              |
|----------------------------------------|-----------------------------------------------------------------|
| raised, or not a stream at all         | nothing: the impl is skipped (the next impl, or the model)      |
| its `final` event, or the stream ended | replace.response, that text (nothing to stream)                 |
| a piece of text, or none yet           | replace.responseStream {plugin, streamId}: the stream stays open|

An open stream is read ahead into a bounded queue by a task of its own. StreamModelAnswer claims it
(`next_batch(claim=True)`, once, by the session that opened it) and takes what has come in batches: the
pieces, then the end with the whole answer (the `final` event's text, else the pieces joined) or what it
raised. A stream that raises once handed over cannot be skipped any more: the scheduler falls back to the
model.

The streams live in the process that runs the plugin's code (this service, or the plugin's sandbox worker:
its operation "model_stream"); OPEN_STREAMS is that process's registry. Bounds: MAX_OPEN_PER_PLUGIN open
streams per plugin (the oldest unclaimed one is closed for a new one; every one claimed: the new one is
refused and its impl skipped), an unclaimed stream is closed after UNCLAIMED_TIMEOUT_S, and each batch
waits at most its `wait_s` for a piece (then the stream fails as stalled and is closed).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

from shared.logs import get_logger
from shared.plugin_sdk.agent_plugins import PluginAgentHooks
from shared.plugin_sdk.hookspecs import StreamEvent
from shared.plugin_threads import call_plugin_code, thread_owner

log = get_logger(component="hookspecs")

MAX_OPEN_PER_PLUGIN = 64
UNCLAIMED_TIMEOUT_S = 60.0
# How long PreLLMCall waits for a stream's first event: within any handler timeout (5 s by default).
FIRST_EVENT_WAIT_S = 1.0
# Events read ahead of the reader.
READ_AHEAD = 256
# Closing a stream runs the plugin's cleanup (a generator's finally): not waited for longer.
CLOSE_WAIT_S = 5.0
HOOK = "run_model_stream"
_END = object()


@dataclass(frozen=True)
class StreamAnswer:
    """A stream kept open: PreLLMCall's replace.responseStream."""

    plugin: str
    stream_id: str

    def wire(self) -> dict[str, str]:
        return {"plugin": self.plugin, "streamId": self.stream_id}


def _event(hooks: PluginAgentHooks, impl: Any, item: Any) -> tuple[str, str] | None:
    """("text" | "final", text) of one item a stream gave; a tool call or anything else is skipped."""
    if isinstance(item, str):
        return ("text", item)
    if isinstance(item, StreamEvent) and item.kind in ("text", "final"):
        return (item.kind, str(item.text))
    if isinstance(item, StreamEvent) and item.kind == "tool_call":
        return None  # the kernel answers the call with text: a tool call event has no place in it
    hooks.wrong_type(HOOK, impl, item, "StreamEvent or str")
    return None


class PluginStream:
    """One run_model_stream answer being read: a task moves its events into a bounded queue."""

    def __init__(self, hooks: PluginAgentHooks, impl: Any, session_id: str, events: AsyncIterator[Any] | Iterator[Any]) -> None:
        self.plugin_id = hooks.plugin_id
        self.session_id = session_id
        self.stream_id = secrets.token_hex(12)
        self.claimed = False
        self.closed = False
        # The text pieces taken so far: the whole answer when the stream ends without a `final` event.
        self.pieces: list[str] = []
        self._hooks, self._impl, self._events = hooks, impl, events
        self._queue: asyncio.Queue[tuple[str, str]] = asyncio.Queue(READ_AHEAD)
        self._head: tuple[str, str] | None = None
        self._expiry: asyncio.TimerHandle | None = None
        self._reading = asyncio.get_running_loop().create_task(self._read(), name=f"model-stream-{self.plugin_id}")

    async def _next(self) -> Any:
        if hasattr(self._events, "__anext__"):
            return await anext(self._events, _END)  # type: ignore[arg-type]
        return await call_plugin_code(next, self._events, _END)

    async def _read(self) -> None:
        # Its threads are its own, not those of the call that opened it (a sandbox worker counts a call's threads).
        thread_owner.set(None)
        try:
            while True:
                item = await self._next()
                if item is _END:
                    await self._queue.put(("end", ""))
                    return
                event = _event(self._hooks, self._impl, item)
                if event is not None:
                    await self._queue.put(event)
                    if event[0] == "final":
                        return
        except Exception as error:  # plugin code: logged, reported to on_error; the reader sees the error
            log.warning("hookimpl.raised", plugin_id=self.plugin_id, hook=HOOK, impl=self._impl.plugin_name,
                        error=f"{type(error).__name__}: {error}")
            await self._queue.put(("error", f"{type(error).__name__}: {error}"))
            if self._hooks.on_raised is not None:
                await self._hooks.on_raised(HOOK, error)

    async def first(self, wait_s: float) -> tuple[str, str] | None:
        """The first event (kept for the reader), or None when none came within `wait_s`."""
        try:
            self._head = await asyncio.wait_for(self._queue.get(), wait_s)
        except TimeoutError:
            return None
        return self._head

    async def take(self, wait_s: float) -> dict[str, Any]:
        """What came since the last take, waiting up to `wait_s` for the first of it: {pieces} while the
        stream goes on, with `final` (the whole answer) or `error` at its end (the stream is then closed)."""
        head, self._head = self._head, None
        if head is None:
            try:
                head = await asyncio.wait_for(self._queue.get(), wait_s)
            except TimeoutError:
                self.close()
                return {"pieces": [], "error": f"the stream gave nothing for {wait_s:g} s (stalled)"}
        events = [head]
        while events[-1][0] == "text" and not self._queue.empty():
            events.append(self._queue.get_nowait())
        pieces = [text for kind, text in events if kind == "text" and text]
        self.pieces.extend(pieces)
        kind, text = events[-1]
        if kind == "text":
            return {"pieces": pieces}
        self.close()
        if kind == "error":
            return {"pieces": pieces, "error": text}
        return {"pieces": pieces, "final": text if kind == "final" else "".join(self.pieces)}

    def expire_in(self, seconds: float, expired: Any) -> None:
        self._expiry = asyncio.get_running_loop().call_later(seconds, expired)

    def claim(self) -> None:
        self.claimed = True
        if self._expiry is not None:
            self._expiry.cancel()

    def close(self) -> None:
        """Stop reading; the plugin's generator is closed in the background (its cleanup bounded)."""
        if self.closed:
            return
        self.closed = True
        if self._expiry is not None:
            self._expiry.cancel()
        self._reading.cancel()
        task = asyncio.get_running_loop().create_task(self._finish(), name=f"model-stream-close-{self.plugin_id}")
        _CLOSING.add(task)
        task.add_done_callback(_CLOSING.discard)

    async def _finish(self) -> None:
        await asyncio.wait([self._reading], timeout=CLOSE_WAIT_S)
        events: Any = self._events
        with contextlib.suppress(Exception):  # plugin code: a cleanup that fails or hangs changes nothing
            if hasattr(events, "aclose"):
                await asyncio.wait_for(events.aclose(), CLOSE_WAIT_S)
            elif hasattr(events, "close"):
                await asyncio.wait_for(call_plugin_code(events.close), CLOSE_WAIT_S)


# Streams being closed (their tasks kept referenced until done).
_CLOSING: set[asyncio.Task] = set()


class OpenStreams:
    """The open streams of one process, by plugin: what StreamModelAnswer reads."""

    def __init__(self) -> None:
        self._by_plugin: dict[str, OrderedDict[str, PluginStream]] = {}

    def keep(self, stream: PluginStream) -> StreamAnswer | None:
        """Keep `stream` open for its reader; None (and it is closed) when the plugin has too many being read."""
        streams = self._by_plugin.setdefault(stream.plugin_id, OrderedDict())
        if len(streams) >= MAX_OPEN_PER_PLUGIN:
            oldest = next((other for other in streams.values() if not other.claimed), None)
            if oldest is None:
                stream.close()
                log.warning("hookimpl.stream_refused", plugin_id=stream.plugin_id, hook=HOOK,
                            why=f"{MAX_OPEN_PER_PLUGIN} of its streams are being read")
                return None
            self._drop(oldest, f"unread, closed for a newer one (at most {MAX_OPEN_PER_PLUGIN} open)")
        streams[stream.stream_id] = stream
        stream.expire_in(UNCLAIMED_TIMEOUT_S, lambda: self._drop(stream, f"never read within {UNCLAIMED_TIMEOUT_S:g} s"))
        return StreamAnswer(stream.plugin_id, stream.stream_id)

    def _find(self, plugin_id: str, stream_id: str) -> PluginStream | None:
        streams = self._by_plugin.get(plugin_id)
        return streams.get(stream_id) if streams is not None else None

    def _drop(self, stream: PluginStream, why: str = "") -> None:
        streams = self._by_plugin.get(stream.plugin_id)
        if streams is not None and streams.pop(stream.stream_id, None) is not None and not streams:
            del self._by_plugin[stream.plugin_id]
        if why:
            log.info("hookimpl.stream_closed", plugin_id=stream.plugin_id, stream_id=stream.stream_id, why=why)
        stream.close()

    async def next_batch(self, plugin_id: str, stream_id: str, *, session_id: str, claim: bool, wait_s: float) -> dict[str, Any]:
        """The stream's next batch (PluginStream.take); {missing: why} when there is no such stream to read:
        `claim` (the first batch) takes an unclaimed stream of `session_id`, later batches the claimed one."""
        stream = self._find(plugin_id, stream_id)
        if stream is None or stream.session_id != session_id:
            return {"missing": f"plugin {plugin_id} has no open stream {stream_id!r} in session {session_id}"}
        if stream.claimed is claim:
            why = "is being read by another caller" if claim else "was not claimed: read it from its first batch"
            return {"missing": f"stream {stream_id!r} of plugin {plugin_id} {why}"}
        if claim:
            stream.claim()
        batch = await stream.take(wait_s)
        if stream.closed:
            self._drop(stream)
        return batch

    def close(self, plugin_id: str, stream_id: str) -> None:
        """The reader is gone: the stream is closed (nothing when it is not open)."""
        stream = self._find(plugin_id, stream_id)
        if stream is not None:
            self._drop(stream, "its reader stopped")

    def __len__(self) -> int:
        return sum(len(streams) for streams in self._by_plugin.values())


OPEN_STREAMS = OpenStreams()


async def _iterator(hooks: PluginAgentHooks, impl: Any, outcome: Any) -> AsyncIterator[Any] | Iterator[Any] | None:
    """The events of what an impl returned; None (logged) when it is no stream, or making one raised."""
    try:
        if hasattr(outcome, "__aiter__"):
            return outcome.__aiter__()
        if hasattr(outcome, "__iter__") and not isinstance(outcome, (str, bytes, dict)):
            return await call_plugin_code(iter, outcome)
    except Exception as error:  # plugin code
        hooks.wrong_type(HOOK, impl, error, "a stream that can be read")
        return None
    hooks.wrong_type(HOOK, impl, outcome, "an (async) iterator of StreamEvent")
    return None


async def open_answer(hooks: PluginAgentHooks, impl: Any, outcome: Any, session_id: str) -> str | StreamAnswer | None:
    """A run_model_stream impl's answer: its text, its stream kept open, or None (skipped); the table above."""
    events = await _iterator(hooks, impl, outcome)
    if events is None:
        return None
    stream = PluginStream(hooks, impl, session_id, events)
    try:
        first = await stream.first(FIRST_EVENT_WAIT_S)
    except BaseException:
        stream.close()  # the handler timed out or was cancelled
        raise
    if first is None or first[0] == "text":
        return OPEN_STREAMS.keep(stream)
    stream.close()
    kind, text = first
    if kind == "error":
        return None
    return text if kind == "final" else ""

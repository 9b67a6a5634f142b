"""A plugin's answer to a model call, read as it streams: PreLLMCall's replace.responseStream, which the hooks
service sets when a plugin's run_model_stream hookspec answers (docs/hooks.md, PreLLMCall).

The chunks of the hooks service's StreamModelAnswer go the way a gateway stream's deltas go: a story's text
to the player as narrative pieces (SegmentTextStream), the whole text the call's reply. A stream that fails
before its end (the plugin raised, it stalled past agent.loop.idleTimeoutMs, the hooks service lost it)
leaves the call to the model: what streamed of it is withdrawn first (a reset piece, as for a draft sent back
for correction).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import grpc

from services.scheduler.agent.model_call import OnNarrative, PluginStreamRef
from services.scheduler.agent.story_stream import SegmentTextStream, StreamedPiece
from services.scheduler.hooks.bus import ExecutionScope, HookBus


@dataclass(frozen=True)
class PluginAnswer:
    """A plugin stream read to its end (`text`: the whole answer), or why it failed (`text` None)."""

    text: str | None
    error: str = ""
    # First piece to last: streaming time, not counted against the runtime's timeoutMs (as a model's).
    streamed_ms: int = 0


class _Shown:
    """What the player saw of the stream: its text pieces through SegmentTextStream, as a model's deltas."""

    def __init__(self, on_narrative: OnNarrative, stream_story: bool) -> None:
        self._on_narrative = on_narrative
        self._stream_story = stream_story
        self._segments = SegmentTextStream()
        self.raw: list[str] = []
        self.any = False

    async def feed(self, text: str) -> None:
        self.raw.append(text)
        if self._stream_story:
            for piece in self._segments.feed(text):
                self.any = True
                await self._on_narrative(piece)

    async def withdraw(self) -> None:
        if self.any:
            await self._on_narrative(StreamedPiece("", reset=True))
        self.any, self._segments = False, SegmentTextStream()

    async def settle(self, whole: str) -> None:
        """A `final` text that is not the pieces joined: the player sees it instead (the story must match)."""
        if self._stream_story and whole != "".join(self.raw):
            await self.withdraw()
            await self.feed(whole)


async def read_plugin_stream(hooks: HookBus, scope: ExecutionScope, plugin_id: str, runtime_id: str, ref: PluginStreamRef, *,
                             stream_story: bool, on_narrative: OnNarrative, timeout_s: float, idle_s: float) -> PluginAnswer:
    """The plugin's answer, its story text streamed to the player as it comes when `stream_story`; each chunk
    waited for at most `idle_s`, the whole call at most `timeout_s`."""
    shown = _Shown(on_narrative, stream_story)
    started: float | None = None
    call = hooks.stream_model_answer(scope, plugin_id, runtime_id, ref.plugin_id, ref.stream_id, timeout_s)
    try:
        while True:
            chunk = await asyncio.wait_for(call.read(), idle_s)
            if chunk is grpc.aio.EOF:
                error = "the stream ended without its last chunk"
                break
            if chunk.error:
                error = chunk.error
                break
            if chunk.final:
                await shown.settle(chunk.text)
                return PluginAnswer(chunk.text, streamed_ms=int((time.monotonic() - (started or time.monotonic())) * 1000))
            started = started or time.monotonic()
            await shown.feed(chunk.text)
    except TimeoutError:
        error = f"no piece for {idle_s:g} s (agent.loop.idleTimeoutMs)"
    except grpc.aio.AioRpcError as failed:
        error = f"StreamModelAnswer failed: {failed.code().name}: {failed.details()}"
    finally:
        call.cancel()
    await shown.withdraw()
    return PluginAnswer(None, error)

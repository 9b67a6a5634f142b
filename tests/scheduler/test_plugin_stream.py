"""A plugin's streamed answer to a model call as the agent loop reads it (services/scheduler/agent/plugin_stream.py):
replace.responseStream taken or ignored, pieces streamed as story text, a `final` that differs shown instead,
a failure withdrawn. The end-to-end path is tests/e2e/test_event_keys.py (run_model_stream)."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from covel.hooks.v1 import hooks_pb2
from services.scheduler.agent.model_call import PluginStreamRef, apply_pre_llm_call
from services.scheduler.agent.plugin_stream import read_plugin_stream
from services.scheduler.agent.story_stream import StreamedPiece

ASYNC = pytest.mark.asyncio(loop_scope="session")

STORY = '{"segments": [{"kind": "narration", "text": "The door opens."}]}'


@pytest.mark.parametrize(("payload", "expected"), [
    ({"responseStream": {"plugin": "p", "streamId": "s1"}}, PluginStreamRef("p", "s1")),
    ({"responseStream": {"plugin": "p", "streamId": ""}}, None),
    ({"responseStream": {"plugin": 3, "streamId": "s1"}}, None),
    ({"responseStream": "p/s1"}, None),
    ({"responseStream": {"plugin": "p", "streamId": "s1"}, "response": {"content": "text"}}, None),
])
def test_response_stream_is_taken_only_well_formed_and_a_response_wins(payload, expected) -> None:
    choices = apply_pre_llm_call(payload, [], "story", [], available={}, tools_offered=True, stream=True)
    assert choices.plugin_stream == expected
    assert choices.stream is ("response" not in payload)


class FakeCall:
    def __init__(self, chunks, stall_after: int | None = None) -> None:
        self.chunks = list(chunks)
        self.stall_after = stall_after
        self.cancelled = False

    async def read(self):
        if self.stall_after is not None and not self.stall_after:
            await asyncio.sleep(10)
        if self.stall_after:
            self.stall_after -= 1
        if not self.chunks:
            return grpc.aio.EOF
        chunk = self.chunks.pop(0)
        if isinstance(chunk, Exception):
            raise chunk
        return chunk

    def cancel(self) -> None:
        self.cancelled = True


class FakeBus:
    def __init__(self, call: FakeCall) -> None:
        self.call = call
        self.asked: list[tuple] = []

    def stream_model_answer(self, *args):
        self.asked.append(args)
        return self.call


def pieces_of(text: str) -> list[hooks_pb2.StreamModelAnswerChunk]:
    return [hooks_pb2.StreamModelAnswerChunk(text=text[start:start + 10]) for start in range(0, len(text), 10)]


async def read(call: FakeCall, stream_story: bool = True, idle_s: float = 5.0):
    shown: list[StreamedPiece] = []

    async def on_narrative(piece: StreamedPiece) -> None:
        shown.append(piece)

    bus = FakeBus(call)
    answer = await read_plugin_stream(bus, "scope", "narrator", "narrator", PluginStreamRef("p", "s1"),  # type: ignore[arg-type]
                                      stream_story=stream_story, on_narrative=on_narrative, timeout_s=30, idle_s=idle_s)
    assert bus.asked == [("scope", "narrator", "narrator", "p", "s1", 30)] and call.cancelled
    return answer, shown


def visible(shown: list[StreamedPiece]) -> str:
    text = ""
    for piece in shown:
        text = "" if piece.reset else text + piece.text
    return text


@ASYNC
async def test_pieces_stream_as_story_text_and_the_final_text_is_the_answer() -> None:
    answer, shown = await read(FakeCall([*pieces_of(STORY), hooks_pb2.StreamModelAnswerChunk(text=STORY, final=True)]))
    assert answer.text == STORY and answer.error == ""
    assert len(shown) >= 2 and not any(piece.reset for piece in shown) and visible(shown) == "The door opens."


@ASYNC
async def test_a_final_text_other_than_the_pieces_is_shown_instead() -> None:
    other = '{"segments": [{"kind": "narration", "text": "The door stays shut."}]}'
    answer, shown = await read(FakeCall([*pieces_of(STORY), hooks_pb2.StreamModelAnswerChunk(text=other, final=True)]))
    assert answer.text == other and visible(shown) == "The door stays shut." and any(piece.reset for piece in shown)


@ASYNC
async def test_nothing_streams_for_a_call_that_does_not_stream_its_story() -> None:
    answer, shown = await read(FakeCall([*pieces_of(STORY), hooks_pb2.StreamModelAnswerChunk(text=STORY, final=True)]),
                               stream_story=False)
    assert answer.text == STORY and shown == []


@ASYNC
@pytest.mark.parametrize(("ending", "error"), [
    (hooks_pb2.StreamModelAnswerChunk(error="RuntimeError: model bug"), "RuntimeError: model bug"),
    (None, "ended without its last chunk"),
])
async def test_a_stream_that_fails_is_withdrawn(ending, error) -> None:
    answer, shown = await read(FakeCall([*pieces_of(STORY)[:5], *([ending] if ending else [])]))
    assert answer.text is None and error in answer.error
    assert shown[-1].reset and visible(shown) == ""


@ASYNC
async def test_a_silent_stream_fails_after_the_idle_timeout() -> None:
    answer, shown = await read(FakeCall(pieces_of(STORY), stall_after=5), idle_s=0.1)
    assert answer.text is None and "no piece for 0.1 s" in answer.error and shown[-1].reset

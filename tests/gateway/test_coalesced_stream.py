"""Generate sends the deltas that are ready at once as one message (issue 19), never holding text back
for long and never holding tool calls or the final reply behind text."""

from __future__ import annotations

import asyncio
import time

import pytest

from covel.gateway.v1 import gateway_pb2
from services.gateway.chat import Message
from services.gateway.events import ContentDelta, Event, Final, ToolCallDelta, how_held, join_deltas
from services.gateway.providers.scripted import provider as scripted
from shared.stream_coalescing import MAX_JOINED_CHARS, Channel, coalesce, coalesce_source
from tests.gateway.conftest import collect, running_gateway, user
from tests.gateway.fake_openai import FakeOpenAI, SseReply, delta
from tests.gateway.test_openai_compatible import openai_settings


def story_request(text: str) -> gateway_pb2.GenerateRequest:
    return gateway_pb2.GenerateRequest(
        slot="story", messages=[gateway_pb2.ChatMessage(role="system", content="You are the narrator."), user(text)])


async def test_a_scripted_story_is_one_text_message_and_the_final() -> None:
    async with running_gateway() as gateway:
        deltas, final = await collect(gateway.Generate(story_request("I light the lantern")))
    # The scripted model writes its story in 8-16 character pieces, all ready at once.
    assert len(final.message.content) > 10 * scripted.CHUNK_MAX
    assert [d.WhichOneof("event") for d in deltas] == ["content_delta"]
    assert deltas[0].content_delta == final.message.content


async def test_spaced_deltas_go_as_they_come_and_the_first_text_is_not_held(fake_openai: FakeOpenAI, monkeypatch) -> None:
    gap_s = 0.3
    pieces = ["Once ", "upon ", "a ", "time."]
    fake_openai.responses.append(SseReply([delta(role=True), *map(delta, pieces), delta(finish="stop")], delay_s=gap_s))
    async with running_gateway(**openai_settings(fake_openai, monkeypatch)) as gateway:
        arrivals = []
        async for event in gateway.Generate(gateway_pb2.GenerateRequest(slot="story", messages=[user("hello")])):
            arrivals.append((time.monotonic(), event))
    texts = [(at, event.content_delta) for at, event in arrivals if event.WhichOneof("event") == "content_delta"]
    # Far apart (more than the flush interval): each piece is its own message, sent when it comes.
    assert [text for _, text in texts] == pieces
    final_at = arrivals[-1][0]
    assert arrivals[-1][1].final.message.content == "".join(pieces)
    # The first text reached the caller while the model was still writing (not held for what followed).
    assert final_at - texts[0][0] >= (len(pieces) - 1) * gap_s * 0.7


async def test_tool_call_deltas_ready_at_once_join_per_call(fake_openai: FakeOpenAI, monkeypatch) -> None:
    call_a = [{"index": 0, "id": "call_a", "type": "function", "function": {"name": "weather", "arguments": ""}}]
    fake_openai.responses.append(SseReply([
        delta("Let me "), delta("check."), delta(tool_calls=call_a),
        *(delta(tool_calls=[{"index": 0, "function": {"arguments": piece}}]) for piece in ['{"ci', 'ty":', '"Oslo"}']),
        delta(finish="tool_calls"),
    ]))
    async with running_gateway(**openai_settings(fake_openai, monkeypatch)) as gateway:
        deltas, final = await collect(gateway.Generate(gateway_pb2.GenerateRequest(slot="story", messages=[user("weather?")])))
    kinds = [d.WhichOneof("event") for d in deltas]
    # Text first, then the tool call: never mixed, never reordered.
    assert kinds == sorted(kinds)
    assert "".join(d.content_delta for d in deltas) == final.message.content == "Let me check."
    calls = [d.tool_call_delta for d in deltas if d.WhichOneof("event") == "tool_call_delta"]
    assert (calls[0].id, calls[0].name) == ("call_a", "weather")
    assert "".join(c.arguments for c in calls) == final.message.tool_calls[0].arguments == '{"city":"Oslo"}'
    # Seven SSE events of deltas; what arrived in one read went as one message.
    assert len(deltas) <= 7


async def test_a_cancelled_stream_stops_its_model_call() -> None:
    async with running_gateway(gateway_scripted_chunk_delay_ms=50) as gateway:
        call = gateway.Generate(story_request("I wait"))
        first = await call.read()
        assert first.WhichOneof("event") == "content_delta"
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call.read()
        # The servicer runs in this process: its model call (the pump task) ends with the stream.
        for _ in range(100):
            pumps = [t for t in asyncio.all_tasks() if "pump" in t.get_coro().__qualname__ and not t.done()]
            if not pumps:
                break
            await asyncio.sleep(0.02)
        assert pumps == []


# -- the coalescing rules, on the gateway's own events -----------------------------------------


def final() -> Final:
    return Final(message=Message(role="assistant", content=""), finish_reason="stop")


async def test_text_after_text_waits_the_flush_interval_but_a_final_goes_at_once() -> None:
    flush_s = 0.5
    channel: Channel[Event] = Channel()
    stream = coalesce(channel, join_deltas, how_held, flush_s)
    channel.put(ContentDelta("a"))
    started = time.monotonic()
    # The first text goes once nothing more is ready, without waiting for the flush interval.
    assert await asyncio.wait_for(anext(stream), flush_s / 2) == ContentDelta("a")
    assert time.monotonic() - started < flush_s / 2

    async def write_more() -> None:
        for piece in "bcd":
            channel.put(ContentDelta(piece))
            await asyncio.sleep(0.01)

    started = time.monotonic()
    await write_more()
    # Text after text: joined with what came within the flush interval.
    assert await anext(stream) == ContentDelta("bcd")
    assert time.monotonic() - started >= flush_s * 0.9

    channel.put(ContentDelta("e"))
    await asyncio.sleep(0.01)
    channel.put(final())
    channel.close()
    started = time.monotonic()
    # A Final flushes the held text at once and follows it.
    assert await anext(stream) == ContentDelta("e")
    assert isinstance(await anext(stream), Final)
    assert time.monotonic() - started < flush_s / 2
    with pytest.raises(StopAsyncIteration):
        await anext(stream)


async def test_joined_text_stays_under_the_size_cap() -> None:
    channel: Channel[Event] = Channel()
    piece = "x" * (MAX_JOINED_CHARS // 3 + 1)
    for _ in range(5):
        channel.put(ContentDelta(piece))
    channel.put(ToolCallDelta(0, "c1", "roll", "{"))
    channel.put(ToolCallDelta(0, arguments="}"))
    channel.put(ToolCallDelta(1, "c2", "roll", "{}"))
    channel.close()
    sent = [event async for event in coalesce(channel, join_deltas, how_held)]
    texts = [e.text for e in sent if isinstance(e, ContentDelta)]
    assert [len(t) for t in texts] == [2 * len(piece), 2 * len(piece), len(piece)]
    assert [e for e in sent if isinstance(e, ToolCallDelta)] == [ToolCallDelta(0, "c1", "roll", "{}"), ToolCallDelta(1, "c2", "roll", "{}")]


async def test_a_source_error_comes_after_the_items_before_it() -> None:
    async def failing():
        yield ContentDelta("so far")
        raise RuntimeError("the provider broke")

    stream = coalesce_source(failing(), join_deltas, how_held)
    assert await anext(stream) == ContentDelta("so far")
    with pytest.raises(RuntimeError, match="the provider broke"):
        await anext(stream)


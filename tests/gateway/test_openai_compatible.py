"""The OpenAI-compatible provider against a real local HTTP server speaking the protocol."""

from __future__ import annotations

import textwrap
import time

import grpc
import pytest

from covel.gateway.v1 import gateway_pb2
from shared.structs import to_struct
from tests.gateway.conftest import collect, running_gateway, user
from tests.gateway.fake_openai import FakeOpenAI, JsonReply, SseReply, completion, delta, usage_chunk

KEY = "sk-test-key-do-not-leak"
WEATHER = {"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}}


def openai_settings(fake: FakeOpenAI, monkeypatch, **extra):
    monkeypatch.setenv("COVEL_TEST_OPENAI_KEY", KEY)
    return {
        "gateway_openai_base_url": fake.base_url,
        "gateway_openai_model": "gpt-test",
        "gateway_openai_api_key_env": "COVEL_TEST_OPENAI_KEY",
        **extra,
    }


def request(**extra) -> gateway_pb2.GenerateRequest:
    return gateway_pb2.GenerateRequest(slot="story", messages=[user("hello")], **extra)


async def test_non_streamed_reply_and_what_was_sent(fake_openai: FakeOpenAI, monkeypatch) -> None:
    fake_openai.responses.append(JsonReply(body=completion("Hi there.", usage={"prompt_tokens": 5, "completion_tokens": 3})))
    conversation = [
        gateway_pb2.ChatMessage(role="system", content="Be brief."),
        user("weather?"),
        gateway_pb2.ChatMessage(role="assistant", tool_calls=[gateway_pb2.ToolCall(id="c1", name="weather", arguments='{"city":"Oslo"}')]),
        gateway_pb2.ChatMessage(role="tool", tool_call_id="c1", content="sunny"),
    ]
    async with running_gateway(**openai_settings(fake_openai, monkeypatch)) as gateway:
        reply = await gateway.GenerateOnce(
            gateway_pb2.GenerateRequest(
                slot="story",
                messages=conversation,
                tools=[gateway_pb2.ToolDefinition(name="weather", description="Look it up", parameters=to_struct(WEATHER))],
                tool_choice="weather",
                response_format=gateway_pb2.ResponseFormat(name="narrative-engine@2", schema=to_struct({"type": "object"})),
                temperature=0.5,
                max_tokens=100,
            )
        )
    assert reply.message.content == "Hi there."
    assert reply.finish_reason == gateway_pb2.FINISH_REASON_STOP
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens, reply.usage.total_tokens) == (5, 3, 8)
    assert (reply.provider, reply.model, reply.attempts) == ("openai", "gpt-test", 1)
    (sent,) = fake_openai.requests
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    body = sent.body
    assert body["model"] == "gpt-test" and body["stream"] is False
    assert body["messages"][2] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "weather", "arguments": '{"city":"Oslo"}'}}],
    }
    assert body["messages"][3] == {"role": "tool", "content": "sunny", "tool_call_id": "c1"}
    assert body["tools"][0]["function"]["parameters"] == WEATHER
    assert body["tool_choice"] == {"type": "function", "function": {"name": "weather"}}
    assert body["response_format"] == {"type": "json_schema", "json_schema": {"name": "narrative-engine_2", "schema": {"type": "object"}}}
    assert (body["temperature"], body["max_tokens"]) == (0.5, 100)


async def test_streamed_reply_with_tool_call_deltas_and_usage(fake_openai: FakeOpenAI, monkeypatch) -> None:
    fake_openai.responses.append(
        SseReply(
            [
                delta(role=True),
                delta("Let me "),
                delta("check."),
                delta(tool_calls=[{"index": 0, "id": "call_a", "type": "function", "function": {"name": "weather", "arguments": ""}}]),
                delta(tool_calls=[{"index": 0, "function": {"arguments": '{"ci'}}]),
                delta(tool_calls=[{"index": 1, "id": "call_b", "function": {"name": "weather", "arguments": '{"city":"Rome"}'}}]),
                delta(tool_calls=[{"index": 0, "function": {"arguments": 'ty":"Oslo"}'}}]),
                delta(finish="tool_calls"),
                usage_chunk(12, 9),
            ]
        )
    )
    async with running_gateway(**openai_settings(fake_openai, monkeypatch)) as gateway:
        deltas, final = await collect(
            gateway.Generate(request(tools=[gateway_pb2.ToolDefinition(name="weather", parameters=to_struct(WEATHER))], tool_choice="auto"))
        )
    # Deltas that arrive in one read go as one message: the pieces per call concatenate to the reply.
    assert "".join(d.content_delta for d in deltas if d.WhichOneof("event") == "content_delta") == "Let me check."
    tool_deltas = [d.tool_call_delta for d in deltas if d.WhichOneof("event") == "tool_call_delta"]
    assert (tool_deltas[0].index, tool_deltas[0].id, tool_deltas[0].name) == (0, "call_a", "weather")
    assert [d.index for d in tool_deltas if d.id] == [0, 1]
    assert "".join(d.arguments for d in tool_deltas if d.index == 0) == '{"city":"Oslo"}'
    assert final.message.content == "Let me check."
    assert [(t.id, t.name, t.arguments) for t in final.message.tool_calls] == [
        ("call_a", "weather", '{"city":"Oslo"}'),
        ("call_b", "weather", '{"city":"Rome"}'),
    ]
    assert final.finish_reason == gateway_pb2.FINISH_REASON_TOOL_CALLS
    assert (final.usage.prompt_tokens, final.usage.completion_tokens, final.usage.total_tokens) == (12, 9, 21)
    body = fake_openai.requests[0].body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["tool_choice"] == "auto"


async def test_429_retry_after_is_honoured(fake_openai: FakeOpenAI, monkeypatch) -> None:
    fake_openai.responses += [
        JsonReply(429, {"error": {"message": "slow down"}}, headers={"retry-after": "1"}),
        JsonReply(body=completion("finally")),
    ]
    async with running_gateway(**openai_settings(fake_openai, monkeypatch)) as gateway:
        reply = await gateway.GenerateOnce(request())
    assert reply.message.content == "finally" and reply.attempts == 2
    first, second = fake_openai.requests
    assert second.at - first.at >= 0.95


async def test_retry_after_beyond_the_budget_is_not_waited_for(fake_openai: FakeOpenAI, monkeypatch) -> None:
    fake_openai.responses.append(JsonReply(429, {"error": {"message": "quota"}}, headers={"retry-after": "30"}))
    async with running_gateway(**openai_settings(fake_openai, monkeypatch, gateway_call_budget_s=2)) as gateway:
        started = time.monotonic()
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await gateway.GenerateOnce(request())
    assert time.monotonic() - started < 1.5
    assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "429" in caught.value.details()
    assert len(fake_openai.requests) == 1


async def test_500_is_retried(fake_openai: FakeOpenAI, monkeypatch) -> None:
    fake_openai.responses += [JsonReply(500, {"error": {"message": "boom"}}), JsonReply(502, "bad gateway"), JsonReply(body=completion("ok"))]
    async with running_gateway(**openai_settings(fake_openai, monkeypatch)) as gateway:
        deltas, final = await collect(gateway.Generate(request()))
    # The server answered the streamed request with one JSON completion: still a reply.
    assert "".join(d.content_delta for d in deltas) == final.message.content == "ok"
    assert final.attempts == 3 and len(fake_openai.requests) == 3


async def test_400_is_not_retried_and_says_what_the_provider_said(fake_openai: FakeOpenAI, monkeypatch) -> None:
    fake_openai.responses.append(JsonReply(400, {"error": {"message": "Invalid schema for response_format"}}))
    async with running_gateway(**openai_settings(fake_openai, monkeypatch)) as gateway:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await gateway.GenerateOnce(request())
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "Invalid schema for response_format" in caught.value.details()
    assert len(fake_openai.requests) == 1


async def test_401_is_about_credentials_and_never_shows_the_key(fake_openai: FakeOpenAI, monkeypatch) -> None:
    fake_openai.responses.append(JsonReply(401, {"error": {"message": f"Incorrect API key provided: {KEY}"}}))
    async with running_gateway(**openai_settings(fake_openai, monkeypatch)) as gateway:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await collect(gateway.Generate(request()))
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "COVEL_TEST_OPENAI_KEY" in caught.value.details() and KEY not in caught.value.details()
    assert len(fake_openai.requests) == 1


async def test_stream_dropped_mid_way_is_interrupted(fake_openai: FakeOpenAI, monkeypatch) -> None:
    fake_openai.responses.append(SseReply([delta("Once upon "), delta("a time"), delta(" never sent")], drop_after=2))
    async with running_gateway(**openai_settings(fake_openai, monkeypatch)) as gateway:
        deltas, final = await collect(gateway.Generate(request()))
    assert "".join(d.content_delta for d in deltas) == "Once upon a time"
    assert final.finish_reason == gateway_pb2.FINISH_REASON_INTERRUPTED
    assert final.message.content == "Once upon a time" and final.error_message
    assert len(fake_openai.requests) == 1


async def test_stream_dropped_before_output_is_retried(fake_openai: FakeOpenAI, monkeypatch) -> None:
    fake_openai.responses += [SseReply([delta(role=True), delta("x")], drop_after=1), SseReply([delta("fine"), delta(finish="stop")])]
    async with running_gateway(**openai_settings(fake_openai, monkeypatch)) as gateway:
        _, final = await collect(gateway.Generate(request()))
    assert final.message.content == "fine" and final.attempts == 2


async def test_idle_timeout_after_output_is_interrupted(fake_openai: FakeOpenAI, monkeypatch) -> None:
    fake_openai.responses.append(SseReply([delta("slow"), delta(" and slower"), delta(finish="stop")], delay_s=0.6))
    async with running_gateway(**openai_settings(fake_openai, monkeypatch)) as gateway:
        _, final = await collect(gateway.Generate(request(idle_timeout_ms=200)))
    assert final.finish_reason == gateway_pb2.FINISH_REASON_INTERRUPTED
    assert final.message.content == "slow" and "idle" in final.error_message


async def test_first_token_timeout_retries(fake_openai: FakeOpenAI, monkeypatch) -> None:
    fake_openai.responses += [SseReply([delta("late")], first_delay_s=1.0), SseReply([delta("quick"), delta(finish="stop")])]
    async with running_gateway(**openai_settings(fake_openai, monkeypatch)) as gateway:
        _, final = await collect(gateway.Generate(request(first_token_timeout_ms=300)))
    assert final.message.content == "quick" and final.attempts == 2


@pytest.mark.parametrize("streamed", [True, False])
async def test_length_finish_reason(fake_openai: FakeOpenAI, monkeypatch, streamed: bool) -> None:
    if streamed:
        fake_openai.responses.append(SseReply([delta("cut"), delta(finish="length")]))
    else:
        fake_openai.responses.append(JsonReply(body=completion("cut", finish="length")))
    async with running_gateway(**openai_settings(fake_openai, monkeypatch)) as gateway:
        if streamed:
            _, final = await collect(gateway.Generate(request()))
        else:
            final = await gateway.GenerateOnce(request())
    assert final.finish_reason == gateway_pb2.FINISH_REASON_LENGTH and final.message.content == "cut"


async def test_fallback_model_after_repeated_500s(fake_openai: FakeOpenAI, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("COVEL_TEST_OPENAI_KEY", KEY)
    config = tmp_path / "gateway.yaml"
    config.write_text(
        textwrap.dedent(
            f"""
            providers:
              local:
                base_url: {fake_openai.base_url}
                api_key_env: COVEL_TEST_OPENAI_KEY
            slots:
              story: {{provider: local, model: primary, fallbacks: [secondary]}}
            """
        )
    )
    fake_openai.responses += [JsonReply(500, {"error": {"message": "down"}}), JsonReply(503, {"error": {"message": "down"}})]
    fake_openai.responses.append(SseReply([delta("from the fallback"), delta(finish="stop")]))
    async with running_gateway(gateway_config=config, gateway_attempts_per_model=2) as gateway:
        _, final = await collect(gateway.Generate(request()))
    assert [r.body["model"] for r in fake_openai.requests] == ["primary", "primary", "secondary"]
    assert (final.provider, final.model, final.attempts) == ("local", "secondary", 3)
    assert final.message.content == "from the fallback"


async def test_budget_of_attempts_is_shared_and_then_resource_exhausted(fake_openai: FakeOpenAI, monkeypatch) -> None:
    fake_openai.responses += [JsonReply(500, {"error": {"message": "down"}}) for _ in range(10)]
    async with running_gateway(**openai_settings(fake_openai, monkeypatch, gateway_max_attempts=4)) as gateway:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await gateway.GenerateOnce(request())
    assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "4 attempt" in caught.value.details() and len(fake_openai.requests) == 4


async def test_unreachable_provider_uses_up_the_budget(monkeypatch) -> None:
    from tests.conftest import free_addr

    settings = {"gateway_openai_base_url": f"http://{free_addr()}/v1", "gateway_openai_model": "m", "gateway_max_attempts": 2}
    async with running_gateway(**settings) as gateway:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await gateway.GenerateOnce(request())
    assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "cannot reach" in caught.value.details()

"""Finish handling the agent loop needs, request fields, and secrets kept out of logs and errors."""

from __future__ import annotations

import grpc
import pytest
import structlog

from covel.gateway.v1 import gateway_pb2
from shared.errors import field_violations
from shared.structs import to_struct
from tests.gateway.conftest import collect, running_gateway, user
from tests.gateway.fake_openai import FakeOpenAI, JsonReply, SseReply, completion, delta

KEY = "sk-live-0123456789abcdef-secret"


def request(**extra) -> gateway_pb2.GenerateRequest:
    return gateway_pb2.GenerateRequest(slot="story", messages=[user("hello")], **extra)


def settings(fake: FakeOpenAI, monkeypatch, **extra):
    monkeypatch.setenv("COVEL_TEST_SECRET_KEY", KEY)
    return {
        "gateway_openai_base_url": fake.base_url,
        "gateway_openai_model": "m",
        "gateway_openai_api_key_env": "COVEL_TEST_SECRET_KEY",
        **extra,
    }


# --- finish reasons, each surfaced distinctly ----------------------------------------------


@pytest.mark.parametrize("streamed", [True, False])
async def test_other_finish_reason(fake_openai: FakeOpenAI, monkeypatch, streamed: bool) -> None:
    if streamed:
        fake_openai.responses.append(SseReply([delta("half"), delta(finish="content_filter")]))
    else:
        fake_openai.responses.append(JsonReply(body=completion("half", finish="content_filter")))
    async with running_gateway(**settings(fake_openai, monkeypatch)) as gateway:
        final = (await collect(gateway.Generate(request())))[1] if streamed else await gateway.GenerateOnce(request())
    assert final.finish_reason == gateway_pb2.FINISH_REASON_OTHER and final.message.content == "half"


async def test_truncated_stream_keeps_its_text_and_says_length(fake_openai: FakeOpenAI, monkeypatch) -> None:
    fake_openai.responses.append(SseReply([delta('{"segments": [{"te'), delta(finish="length")]))
    async with running_gateway(**settings(fake_openai, monkeypatch)) as gateway:
        _, final = await collect(gateway.Generate(request()))
    assert final.finish_reason == gateway_pb2.FINISH_REASON_LENGTH
    assert final.message.content == '{"segments": [{"te' and not final.error_message


async def test_generation_error_after_output_is_error_with_the_partial_text(fake_openai: FakeOpenAI, monkeypatch) -> None:
    fake_openai.responses.append(SseReply([delta("The door "), {"error": {"message": "model overloaded mid-generation"}}]))
    async with running_gateway(**settings(fake_openai, monkeypatch)) as gateway:
        _, final = await collect(gateway.Generate(request()))
    assert final.finish_reason == gateway_pb2.FINISH_REASON_ERROR
    assert final.message.content == "The door " and "overloaded" in final.error_message
    assert len(fake_openai.requests) == 1


async def test_generation_error_before_output_is_retried_within_max_retries(fake_openai: FakeOpenAI, monkeypatch) -> None:
    fake_openai.responses += [SseReply([{"error": {"message": "generation failed"}}]), SseReply([delta("ok"), delta(finish="stop")])]
    async with running_gateway(**settings(fake_openai, monkeypatch)) as gateway:
        _, final = await collect(gateway.Generate(request(max_retries=1)))
    assert final.finish_reason == gateway_pb2.FINISH_REASON_STOP and final.attempts == 2


@pytest.mark.parametrize("streamed", [True, False])
async def test_generation_errors_past_max_retries_end_as_error(fake_openai: FakeOpenAI, monkeypatch, streamed: bool) -> None:
    if streamed:
        fake_openai.responses += [SseReply([{"error": {"message": "generation failed"}}]) for _ in range(3)]
    else:
        fake_openai.responses += [JsonReply(body={"error": {"message": "generation failed"}}) for _ in range(3)]
    async with running_gateway(**settings(fake_openai, monkeypatch)) as gateway:
        final = (await collect(gateway.Generate(request(max_retries=1))))[1] if streamed else await gateway.GenerateOnce(request(max_retries=1))
    assert final.finish_reason == gateway_pb2.FINISH_REASON_ERROR and "generation failed" in final.error_message
    assert final.message.content == "" and len(fake_openai.requests) == 2


async def test_interrupted_after_partial_output(fake_openai: FakeOpenAI, monkeypatch) -> None:
    fake_openai.responses.append(SseReply([delta("You step "), delta("into"), delta(" the hall")], drop_after=2))
    async with running_gateway(**settings(fake_openai, monkeypatch)) as gateway:
        _, final = await collect(gateway.Generate(request()))
    assert final.finish_reason == gateway_pb2.FINISH_REASON_INTERRUPTED
    assert final.message.content == "You step into" and final.error_message


# --- request fields --------------------------------------------------------------------------


async def test_temperature_zero_is_sent_and_unset_is_not(fake_openai: FakeOpenAI, monkeypatch) -> None:
    async with running_gateway(**settings(fake_openai, monkeypatch)) as gateway:
        await gateway.GenerateOnce(request(temperature=0.0, max_tokens=64))
        await gateway.GenerateOnce(request())
    zero, unset = (r.body for r in fake_openai.requests)
    assert zero["temperature"] == 0 and zero["max_tokens"] == 64
    assert "temperature" not in unset and "max_tokens" not in unset


async def test_tool_choice_none_with_tools_sends_both_and_scripted_answers_text(fake_openai: FakeOpenAI, monkeypatch) -> None:
    tool = gateway_pb2.ToolDefinition(name="roll", parameters=to_struct({"type": "object", "properties": {"n": {"type": "integer"}}}))
    async with running_gateway(**settings(fake_openai, monkeypatch)) as gateway:
        await gateway.GenerateOnce(request(tools=[tool], tool_choice="none"))
    body = fake_openai.requests[0].body
    assert body["tool_choice"] == "none" and body["tools"][0]["function"]["name"] == "roll"
    async with running_gateway() as scripted:
        reply = await scripted.GenerateOnce(request(tools=[tool], tool_choice="none"))
    assert reply.finish_reason == gateway_pb2.FINISH_REASON_STOP and not reply.message.tool_calls and reply.message.content


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"max_retries": 6}, "max_retries"),
        ({"max_retries": -1}, "max_retries"),
        ({"timeout_ms": -5}, "timeout_ms"),
        ({"temperature": 3.5}, "temperature"),
        ({"max_tokens": -1}, "max_tokens"),
    ],
)
async def test_bad_loop_settings_are_invalid_argument_with_the_field(fields: dict, field: str) -> None:
    async with running_gateway() as gateway:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await gateway.GenerateOnce(request(**fields))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert [v.field for v in field_violations(caught.value)] == [field]


# --- secrets -----------------------------------------------------------------------------------


async def test_the_key_never_reaches_logs_errors_or_replies(fake_openai: FakeOpenAI, monkeypatch, capfd) -> None:
    echo = {"error": {"message": f"Incorrect API key provided: {KEY}. Authorization: Bearer {KEY}"}}
    fake_openai.responses += [
        JsonReply(500, echo),  # retried: logged as an attempt failure
        JsonReply(429, echo, headers={"retry-after": "0"}),
        JsonReply(401, echo),  # not retried: the error the caller gets
        SseReply([delta("partial"), {"error": {"message": f"bad key {KEY}"}}]),  # after output: a Final with error_message
        SseReply([{"error": {"message": f"bad key {KEY}"}}]),  # before output, twice: Final error
        SseReply([{"error": {"message": f"bad key {KEY}"}}]),
        JsonReply(400, f"raw body {KEY}"),
    ]
    seen: list[str] = []
    with structlog.testing.capture_logs() as logged:
        async with running_gateway(**settings(fake_openai, monkeypatch)) as gateway:
            with pytest.raises(grpc.aio.AioRpcError) as first:
                await gateway.GenerateOnce(request())
            seen += [first.value.details(), str(first.value.trailing_metadata())]
            _, final = await collect(gateway.Generate(request()))
            seen.append(str(final))
            _, final = await collect(gateway.Generate(request(max_retries=1)))
            seen.append(str(final))
            with pytest.raises(grpc.aio.AioRpcError) as last:
                await gateway.GenerateOnce(request())
            seen += [last.value.details(), str(last.value.trailing_metadata())]
            slots = await gateway.ListSlots(gateway_pb2.ListSlotsRequest())
            seen.append(str(slots))
    out, err = capfd.readouterr()
    assert len(fake_openai.requests) == 7
    assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in fake_openai.requests)  # it was used ...
    # ... and the provider did echo it: redacted in the error the caller got and in the attempt log.
    assert "[redacted]" in last.value.details() and "[redacted]" in repr(logged)
    for text in [*seen, out, err, repr(logged)]:
        assert KEY not in text
        assert KEY[8:20] not in text

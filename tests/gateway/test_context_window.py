"""A model's context window at the gateway (issue 40): a request larger than every window of its slot's models is
answered at once with finish reason context_overflow and asks no provider; a smaller model is skipped for a
fallback whose window holds the request; a provider's own refusal of a too-long request ends the same way."""

from __future__ import annotations

import textwrap

import pytest

from covel.gateway.v1 import gateway_pb2
from services.gateway.settings import GatewaySettings
from services.gateway.slots import SlotConfigError, SlotTable
from shared.model_context import request_tokens, text_tokens
from tests.gateway.conftest import collect, running_gateway, user
from tests.gateway.fake_openai import FakeOpenAI, JsonReply, completion
from tests.gateway.test_openai_compatible import openai_settings

LONG = "word " * 400  # 2000 ASCII characters: 500 tokens


def test_the_estimate_counts_ascii_by_fours_and_other_characters_one_each() -> None:
    assert (text_tokens(""), text_tokens("abcd"), text_tokens("abcde"), text_tokens("叙事人称")) == (0, 1, 2, 4)
    assert request_tokens([["abcd"], ["", "call {}"]], ['{"name": "t"}']) == (4 + 1) + (4 + 0 + 2) + 4


async def test_a_request_past_the_window_asks_no_provider(fake_openai: FakeOpenAI, monkeypatch) -> None:
    settings = openai_settings(fake_openai, monkeypatch, gateway_openai_context_window=200)
    async with running_gateway(**settings) as gateway:
        reply = await gateway.GenerateOnce(gateway_pb2.GenerateRequest(slot="story", messages=[user(LONG)]))
        _, streamed = await collect(gateway.Generate(gateway_pb2.GenerateRequest(slot="story", messages=[user(LONG)])))
    for final in (reply, streamed):
        assert final.finish_reason == gateway_pb2.FINISH_REASON_CONTEXT_OVERFLOW
        assert (final.context_window, final.prompt_tokens_estimate) == (200, 504)
        assert "about 504 tokens" in final.error_message and "openai:gpt-test (200)" in final.error_message
    assert not fake_openai.requests


async def test_a_request_within_the_window_is_sent(fake_openai: FakeOpenAI, monkeypatch) -> None:
    fake_openai.responses.append(JsonReply(body=completion("Fine.")))
    async with running_gateway(**openai_settings(fake_openai, monkeypatch, gateway_openai_context_window=600)) as gateway:
        reply = await gateway.GenerateOnce(gateway_pb2.GenerateRequest(slot="story", messages=[user(LONG)]))
    assert reply.finish_reason == gateway_pb2.FINISH_REASON_STOP and reply.message.content == "Fine."
    assert len(fake_openai.requests) == 1


async def test_a_model_too_small_is_passed_over_for_a_fallback_that_holds_the_request(fake_openai: FakeOpenAI, tmp_path) -> None:
    fake_openai.responses.append(JsonReply(body=completion("From the big one.")))
    config = tmp_path / "gateway.yaml"
    config.write_text(
        textwrap.dedent(f"""
        providers:
          tiny: {{kind: openai-compatible, base_url: {fake_openai.base_url}, context_window: 100}}
          big: {{kind: openai-compatible, base_url: {fake_openai.base_url}, context_window: 10000}}
        slots:
          story: {{provider: tiny, model: small-model, fallbacks: ["big:large-model"]}}
        """)
    )
    async with running_gateway(gateway_config=config) as gateway:
        reply = await gateway.GenerateOnce(gateway_pb2.GenerateRequest(slot="story", messages=[user(LONG)]))
    assert (reply.finish_reason, reply.provider, reply.model) == (gateway_pb2.FINISH_REASON_STOP, "big", "large-model")
    assert [sent.body["model"] for sent in fake_openai.requests] == ["large-model"]


async def test_a_providers_refusal_as_too_long_ends_the_call_as_an_overflow(fake_openai: FakeOpenAI, monkeypatch) -> None:
    said = "This model's maximum context length is 8192 tokens. However, your messages resulted in 9001 tokens."
    fake_openai.responses.append(JsonReply(400, {"error": {"message": said, "code": "context_length_exceeded"}}))
    async with running_gateway(**openai_settings(fake_openai, monkeypatch)) as gateway:
        reply = await gateway.GenerateOnce(gateway_pb2.GenerateRequest(slot="story", messages=[user("hello")]))
    assert reply.finish_reason == gateway_pb2.FINISH_REASON_CONTEXT_OVERFLOW and reply.context_window == 0
    assert said in reply.error_message and reply.attempts == 1
    assert len(fake_openai.requests) == 1


@pytest.mark.parametrize("value", [0, -5, "big", True])
def test_a_context_window_that_is_not_a_positive_number_is_refused_at_startup(tmp_path, value) -> None:
    config = tmp_path / "gateway.yaml"
    config.write_text(
        f"providers:\n  cloud: {{base_url: https://llm.example.com/v1, context_window: {value!r}}}\nslots:\n  default: cloud:m\n".replace(
            "'", ""
        )
    )
    with pytest.raises(SlotConfigError, match="context_window must be a positive number of tokens"):
        SlotTable.from_settings(GatewaySettings(gateway_config=config))

"""Hostile input at the gateway (issue 18 item 5), through a real gateway: schemas that would wedge
the scripted model, NaN and over-deep Structs, and a provider echoing the key in altered forms."""

from __future__ import annotations

import json
import math
import time
from typing import Any

import grpc
import pytest
import structlog

from covel.gateway.v1 import gateway_pb2
from services.gateway.secret_redaction import REDACTED, redact_secret
from shared.errors import field_violations
from shared.structs import to_struct
from tests.gateway.conftest import running_gateway, user
from tests.gateway.fake_openai import FakeOpenAI, JsonReply

KEY = "sk-live-0123456789abcdef-secret"


def structured(schema: dict[str, Any]) -> gateway_pb2.GenerateRequest:
    return gateway_pb2.GenerateRequest(
        slot="plugin", messages=[user("extract")], response_format=gateway_pb2.ResponseFormat(name="thing", schema=to_struct(schema))
    )


def arrays_of_eight(levels: int) -> dict[str, Any]:
    """8^levels strings if built: over the value cap long before."""
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "array", "minItems": 8, "maxItems": 8, "items": schema}
    return schema


def nested(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels - 1):
        schema = {"type": "array", "items": schema}
    return schema


@pytest.mark.parametrize(
    ("schema", "says"),
    [
        ({"type": "string", "minLength": 1e8}, "minLength is 1e+08; the scripted model builds at most 10000"),
        ({"type": "array", "items": {"type": "string"}, "minItems": 10**9}, "minItems is 1e+09; the scripted model builds at most 100"),
        ({"type": "object", "minProperties": 10**6}, "minProperties is 1e+06"),
        ({"type": "string", "pattern": "^" + "".join(f"{letter}{{1000}}" for letter in "abcdefghijk") + "$"}, "asks for strings over 10000"),
        ({"type": "string", "pattern": "^(a{1000}){1000}$"}, "counted repeats nest to at most 1000"),
        ({"type": "string", "pattern": "^(a)\\1$"}, "backreferences"),
        ({"type": "string", "minLength": -1}, "minLength must be a non-negative number"),
        (arrays_of_eight(12), "the schema asks for more than 10000 values"),
    ],
)
async def test_schemas_that_would_wedge_the_scripted_model_are_invalid_argument(schema: dict[str, Any], says: str) -> None:
    started = time.monotonic()
    async with running_gateway() as gateway:
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await gateway.GenerateOnce(structured(schema), timeout=20)
    assert time.monotonic() - started < 5
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert says in raised.value.details(), raised.value.details()
    [violation] = field_violations(raised.value)
    assert violation.field == "response_format.schema"


async def test_a_catastrophic_pattern_is_answered_at_once() -> None:
    schema = {"type": "object", "required": ["name"], "properties": {"name": {"type": "string", "pattern": "^(a+)+$", "maxLength": 40}}}
    started = time.monotonic()
    async with running_gateway() as gateway:
        reply = await gateway.GenerateOnce(structured(schema), timeout=20)
    assert time.monotonic() - started < 5
    assert set(json.loads(reply.message.content)["name"]) == {"a"}


@pytest.mark.parametrize(
    ("parameters", "field", "says"),
    [
        ({"type": "object", "properties": {"n": {"type": "number", "maximum": math.nan}}}, "tools[0].parameters/properties/n/maximum", "NaN or Infinity"),
        ({"type": "object", "default": {"n": math.inf}}, "tools[0].parameters/default/n", "NaN or Infinity"),
        (nested(30), "tools[0].parameters", "nests deeper than 24"),
    ],
)
async def test_nan_infinity_and_over_deep_structs_are_invalid_argument(parameters: dict[str, Any], field: str, says: str) -> None:
    request = gateway_pb2.GenerateRequest(
        slot="plugin",
        messages=[user("roll")],
        tools=[gateway_pb2.ToolDefinition(name="roll", description="Roll.", parameters=to_struct(parameters))],
    )
    async with running_gateway() as gateway:
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await gateway.GenerateOnce(request, timeout=10)
        with pytest.raises(grpc.aio.AioRpcError) as streamed:
            async for _ in gateway.Generate(request, timeout=10):
                pass
    for error in (raised.value, streamed.value):
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error.details()
        [violation] = field_violations(error)
        assert violation.field.startswith(field) and says in violation.description, violation


@pytest.mark.parametrize(
    ("echoed", "kept"),
    [
        (KEY, ""),
        (KEY.upper(), ""),  # re-cased
        (f"{KEY[:14]}\n  {KEY[14:]}", ""),  # split over a line break
        (KEY[:12], ""),  # cut to its first 12 characters
        (f"…{KEY[-10:]}", "…"),  # only its end
    ],
)
def test_redaction_catches_a_key_whole_split_recased_or_cut(echoed: str, kept: str) -> None:
    text = f"Incorrect API key provided: {echoed}. See the docs."
    redacted = redact_secret(text, KEY)
    assert redacted == f"Incorrect API key provided: {kept}{REDACTED}. See the docs.", redacted
    assert redact_secret("nothing secret here, just words and sk-live-other", KEY) == "nothing secret here, just words and sk-live-other"


def openai_settings(fake: FakeOpenAI, monkeypatch) -> dict[str, Any]:
    monkeypatch.setenv("COVEL_TEST_SECRET_KEY", KEY)
    return {"gateway_openai_base_url": fake.base_url, "gateway_openai_model": "m", "gateway_openai_api_key_env": "COVEL_TEST_SECRET_KEY"}


async def test_an_altered_echo_of_the_key_reaches_neither_caller_nor_log(fake_openai: FakeOpenAI, monkeypatch) -> None:
    long_prefix = "x " * 300  # the cut at 500 characters used to fall inside the key
    fake_openai.responses += [JsonReply(400, {"error": {"message": f"{long_prefix}bad key {KEY.lower()[:20]}\n{KEY[20:]}"}})]
    with structlog.testing.capture_logs() as logged:
        async with running_gateway(**openai_settings(fake_openai, monkeypatch)) as gateway:
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await gateway.GenerateOnce(gateway_pb2.GenerateRequest(slot="story", messages=[user("hi")]), timeout=10)
    details = raised.value.details()
    for text in (details, repr(logged)):
        for fragment in (KEY[:10], KEY[8:18], KEY[-10:], KEY.lower()[:10]):
            assert fragment not in text and fragment.lower() not in text.lower(), (fragment, text)
    assert fake_openai.base_url not in details and "127.0.0.1" not in details


async def test_an_unreachable_provider_is_named_not_its_address(monkeypatch) -> None:
    settings = {"gateway_openai_base_url": "http://127.0.0.1:9/v1", "gateway_openai_model": "m", "gateway_max_attempts": 1}
    async with running_gateway(**settings) as gateway:
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await gateway.GenerateOnce(gateway_pb2.GenerateRequest(slot="story", messages=[user("hi")]), timeout=20)
    assert "cannot reach provider" in raised.value.details() and "127.0.0.1" not in raised.value.details(), raised.value.details()

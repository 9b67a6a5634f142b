"""Embed: an OpenAI-compatible /embeddings server (real local HTTP) and the offline scripted embedder."""

from __future__ import annotations

import math
import textwrap

import grpc
import pytest

from covel.gateway.v1 import gateway_pb2
from services.gateway.providers.scripted.hashed_embeddings import DIMENSIONS, MODEL, embed_text
from tests.gateway.conftest import running_gateway
from tests.gateway.fake_openai import FakeOpenAI, JsonReply, embeddings

KEY = "sk-embed-key-do-not-leak"


def embedding_settings(fake: FakeOpenAI, monkeypatch, **extra):
    monkeypatch.setenv("COVEL_TEST_OPENAI_KEY", KEY)
    return {"gateway_openai_base_url": fake.base_url, "gateway_openai_model": "gpt-test",
            "gateway_openai_embedding_model": "embed-test", "gateway_openai_api_key_env": "COVEL_TEST_OPENAI_KEY", **extra}


def cosine(a, b) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


async def test_vectors_come_back_in_input_order_normalised(fake_openai: FakeOpenAI, monkeypatch) -> None:
    fake_openai.responses.append(JsonReply(body=embeddings([3.0, 4.0], [0.0, 2.0], prompt_tokens=6, shuffled=True)))
    async with running_gateway(**embedding_settings(fake_openai, monkeypatch)) as gateway:
        reply = await gateway.Embed(gateway_pb2.EmbedRequest(inputs=["first", "second"]))
    assert [list(v.values) for v in reply.vectors] == [pytest.approx([0.6, 0.8]), pytest.approx([0.0, 1.0])]
    assert (reply.provider, reply.model, reply.dimensions, reply.attempts) == ("openai", "embed-test", 2, 1)
    assert reply.usage.prompt_tokens == 6
    (sent,) = fake_openai.requests
    assert sent.path == "/v1/embeddings"
    assert sent.body == {"model": "embed-test", "input": ["first", "second"], "encoding_format": "float"}
    assert sent.headers["authorization"] == f"Bearer {KEY}"


async def test_500_is_retried_and_429_retry_after_honoured(fake_openai: FakeOpenAI, monkeypatch) -> None:
    fake_openai.responses += [JsonReply(500, {"error": {"message": "busy"}}),
                              JsonReply(429, {"error": {"message": "slow down"}}, headers={"retry-after": "0.2"}),
                              JsonReply(body=embeddings([1.0, 0.0]))]
    async with running_gateway(**embedding_settings(fake_openai, monkeypatch)) as gateway:
        reply = await gateway.Embed(gateway_pb2.EmbedRequest(inputs=["x"]))
    assert reply.attempts == 3
    assert fake_openai.requests[2].at - fake_openai.requests[1].at >= 0.19


async def test_400_is_not_retried_and_401_never_shows_the_key(fake_openai: FakeOpenAI, monkeypatch) -> None:
    fake_openai.responses += [JsonReply(400, {"error": {"message": "input too long"}}),
                              JsonReply(401, {"error": {"message": f"bad key {KEY}"}})]
    async with running_gateway(**embedding_settings(fake_openai, monkeypatch)) as gateway:
        with pytest.raises(grpc.aio.AioRpcError) as rejected:
            await gateway.Embed(gateway_pb2.EmbedRequest(inputs=["x"]))
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await gateway.Embed(gateway_pb2.EmbedRequest(inputs=["x"]))
    assert rejected.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "input too long" in rejected.value.details()
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION and KEY not in refused.value.details()
    assert len(fake_openai.requests) == 2


async def test_a_reply_that_is_not_embeddings_uses_up_the_budget(fake_openai: FakeOpenAI, monkeypatch) -> None:
    fake_openai.default = JsonReply(body={"data": [{"index": 0, "embedding": [1.0]}]})  # one vector for two inputs
    async with running_gateway(**embedding_settings(fake_openai, monkeypatch, gateway_max_attempts=2)) as gateway:
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await gateway.Embed(gateway_pb2.EmbedRequest(inputs=["a", "b"]))
    assert failed.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "1 vector(s) for 2 input(s)" in failed.value.details()


async def test_a_chat_model_is_never_used_to_embed(fake_openai: FakeOpenAI, monkeypatch) -> None:
    settings = embedding_settings(fake_openai, monkeypatch)
    del settings["gateway_openai_embedding_model"]
    async with running_gateway(**settings) as gateway:
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await gateway.Embed(gateway_pb2.EmbedRequest(inputs=["x"]))
    assert failed.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "COVEL_GATEWAY_OPENAI_EMBEDDING_MODEL" in failed.value.details()
    assert fake_openai.requests == []


@pytest.mark.parametrize(("inputs", "field"), [([], "inputs"), (["ok", " "], "inputs[1]"), (["x"] * 257, "inputs"),
                                               (["é" * 20000], "inputs[0]")])
async def test_bad_inputs_are_invalid_argument_naming_the_field(inputs, field) -> None:
    async with running_gateway() as gateway:
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await gateway.Embed(gateway_pb2.EmbedRequest(inputs=inputs))
    assert failed.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert field in failed.value.details()


async def test_the_scripted_embedder_offline() -> None:
    texts = ["Old Tobin tends the lighthouse lamp", "who keeps the light", "The baker sells rye bread"]
    async with running_gateway() as gateway:
        reply = await gateway.Embed(gateway_pb2.EmbedRequest(inputs=texts))
        again = await gateway.Embed(gateway_pb2.EmbedRequest(slot="embedding", inputs=texts[:1]))
    vectors = [list(v.values) for v in reply.vectors]
    assert (reply.provider, reply.model, reply.dimensions) == ("scripted", MODEL, DIMENSIONS)
    assert list(again.vectors[0].values) == vectors[0]  # deterministic
    assert all(math.isclose(cosine(v, v), 1.0, rel_tol=1e-5) for v in vectors)
    # "light" and "lighthouse" share trigrams; the bread shares nothing with the light.
    assert cosine(vectors[0], vectors[1]) > cosine(vectors[2], vectors[1])


def test_hashed_embeddings_features() -> None:
    assert embed_text("the of and") == [0.0] * DIMENSIONS  # stop words only: no features
    assert cosine(embed_text("drowned sailors"), embed_text("a sailor drowning")) > 0.3
    assert cosine(embed_text("旧城门"), embed_text("城门")) > 0.5


async def test_a_yaml_embedding_slot_falls_back_to_its_next_model(fake_openai: FakeOpenAI, tmp_path) -> None:
    config = tmp_path / "gateway.yaml"
    config.write_text(textwrap.dedent(f"""
        providers:
          local: {{base_url: {fake_openai.base_url}}}
        slots:
          default: local:chat-model
          embedding: {{provider: local, model: embed-a, fallbacks: [embed-b]}}
        """))
    fake_openai.responses += [JsonReply(503, {"error": {"message": "down"}}), JsonReply(500, {"error": {"message": "down"}}),
                              JsonReply(body=embeddings([0.0, 1.0]))]
    async with running_gateway(gateway_config=config, gateway_attempts_per_model=2) as gateway:
        reply = await gateway.Embed(gateway_pb2.EmbedRequest(inputs=["x"]))
    assert [r.body["model"] for r in fake_openai.requests] == ["embed-a", "embed-a", "embed-b"]
    assert (reply.provider, reply.model, reply.attempts) == ("local", "embed-b", 3)

"""TurnModelCalls: a turn's GenerateOnce and Embed calls on one stream (shared/call_streams.py), through a real gateway
on the offline scripted model: each answer is the unary method's, a call's error is its answer with the unary
method's status and details, and the scheduler's TurnGateway sends a running turn's calls on it, others unary."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from covel.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from services.gateway.server import start
from services.gateway.settings import GatewaySettings
from services.scheduler.turn_gateway import TurnGateway
from shared.errors import error_info
from tests.conftest import free_addr
from tests.gateway.conftest import running_gateway, user
from tests.support.identities import bare_channel_as, service_tls

pytestmark = pytest.mark.asyncio


def generate(turn_id: str = "t1", temperature: float = 0.5) -> gateway_pb2.GenerateRequest:
    return gateway_pb2.GenerateRequest(slot="story", messages=[user("I wave")], temperature=temperature,
                                       origin=gateway_pb2.CallOrigin(session_id="s1", turn_id=turn_id, runtime_id="narrator"))


def embed(turn_id: str = "t1") -> gateway_pb2.EmbedRequest:
    return gateway_pb2.EmbedRequest(inputs=["the lighthouse", "a lamp"], origin=gateway_pb2.CallOrigin(session_id="s1", turn_id=turn_id))


async def test_calls_on_one_stream_answer_as_their_unary_methods() -> None:
    async with running_gateway() as gateway:
        stream = gateway.TurnModelCalls()
        await stream.write(gateway_pb2.TurnModelCallsRequest(id=1, generate_once=generate()))
        await stream.write(gateway_pb2.TurnModelCallsRequest(id=2, embed=embed()))
        await stream.write(gateway_pb2.TurnModelCallsRequest(id=3, generate_once=generate(temperature=5)))
        await stream.write(gateway_pb2.TurnModelCallsRequest(id=4, embed=gateway_pb2.EmbedRequest()))
        by_id = {answer.id: answer for answer in [await asyncio.wait_for(stream.read(), 30) for _ in range(4)]}
        await stream.done_writing()
        assert await stream.read() == grpc.aio.EOF
        unary = await gateway.GenerateOnce(generate())
        assert by_id[1].generate_once.message.content == unary.message.content and unary.message.content
        assert list(by_id[2].embed.vectors[0].values) == list((await gateway.Embed(embed())).vectors[0].values)
        for call_id, request in ((3, gateway.GenerateOnce(generate(temperature=5))), (4, gateway.Embed(gateway_pb2.EmbedRequest()))):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await request
            error = by_id[call_id].error
            assert error.code == refused.value.code().value[0] and error.message == refused.value.details(), error


async def test_the_schedulers_gateway_sends_a_running_turns_calls_on_its_stream() -> None:
    settings = GatewaySettings(gateway_addr=free_addr(), **service_tls("gateway"))
    running = await start(settings)
    channel = bare_channel_as(settings.gateway_addr, "scheduler")
    try:
        gateway = TurnGateway(channel)
        gateway.turns.begin("t1")
        story = await gateway.GenerateOnce(generate("t1"), timeout=30)
        vectors = await gateway.Embed(embed("t1"), timeout=30)
        on_stream = gateway.turns.of("t1")
        assert on_stream is not None and on_stream._stream is not None, "the turn's calls opened its stream"
        assert story.message.content == (await gateway.GenerateOnce(generate("t2"), timeout=30)).message.content
        assert len(vectors.vectors) == 2 and gateway.turns.of("t2") is None  # another turn's call went unary
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await gateway.GenerateOnce(generate("t1", temperature=5), timeout=30)
        with pytest.raises(grpc.aio.AioRpcError) as unary:
            await gateway.GenerateOnce(generate("t2", temperature=5), timeout=30)
        assert refused.value.code() == unary.value.code() and error_info(refused.value).reason == error_info(unary.value).reason
        gateway.turns.end("t1")
        assert gateway.turns.of("t1") is None
    finally:
        await channel.close()
        await running.stop(0)


async def test_only_the_scheduler_may_open_a_turns_model_stream() -> None:
    settings = GatewaySettings(gateway_addr=free_addr(), **service_tls("gateway"))
    running = await start(settings)
    channel = bare_channel_as(settings.gateway_addr, "hooks")
    try:
        stream = gateway_pb2_grpc.LlmGatewayStub(channel).TurnModelCalls()
        with pytest.raises(grpc.aio.AioRpcError) as refused:  # at the write, or at the read if the write went first
            await stream.write(gateway_pb2.TurnModelCallsRequest(id=1, generate_once=generate()))
            await asyncio.wait_for(stream.read(), 30)
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
    finally:
        await channel.close()
        await running.stop(0)

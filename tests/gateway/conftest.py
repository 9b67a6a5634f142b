"""A real gateway server on a free port, and a stub talking to it over a real channel."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from covel.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from services.gateway.server import start
from services.gateway.settings import GatewaySettings
from tests.conftest import free_addr
from tests.gateway.fake_openai import FakeOpenAI
from tests.support.identities import bare_channel_as, service_tls


@contextlib.asynccontextmanager
async def running_gateway(**overrides: Any) -> AsyncIterator[gateway_pb2_grpc.LlmGatewayStub]:
    values: dict[str, Any] = {"gateway_retry_base_ms": 10, "gateway_retry_max_ms": 50}
    values.update(overrides)
    settings = GatewaySettings(gateway_addr=free_addr(), **{**service_tls("gateway"), **values})
    running = await start(settings)
    # As the scheduler: the gateway's only caller of Generate (shared/security/policy.py).
    channel = bare_channel_as(settings.gateway_addr, "scheduler")
    try:
        yield gateway_pb2_grpc.LlmGatewayStub(channel)
    finally:
        await channel.close()
        await running.stop(0)


@pytest.fixture
def fake_openai():
    with FakeOpenAI() as server:
        yield server


def user(text: str) -> gateway_pb2.ChatMessage:
    return gateway_pb2.ChatMessage(role="user", content=text)


async def collect(stream: Any) -> tuple[list[gateway_pb2.GenerateEvent], gateway_pb2.GenerateResponse]:
    """All events of a Generate stream, and its final response."""
    seen = [event async for event in stream]
    finals = [e.final for e in seen if e.WhichOneof("event") == "final"]
    assert len(finals) == 1, seen
    assert seen[-1].WhichOneof("event") == "final"
    return seen[:-1], finals[0]

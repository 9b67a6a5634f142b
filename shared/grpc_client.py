"""Channels to peer services, and deadline propagation."""

from __future__ import annotations

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", 32 * 1024 * 1024),
    ("grpc.max_send_message_length", 32 * 1024 * 1024),
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.enable_retries", 1),
]


def open_channel(addr: str) -> grpc.aio.Channel:
    return grpc.aio.insecure_channel(addr, options=CHANNEL_OPTIONS)


def remaining_timeout(context: grpc.aio.ServicerContext | None, default_s: float) -> float:
    """The time left on the caller's deadline, so outgoing calls never outlive it."""
    if context is None:
        return default_s
    remaining = context.time_remaining()
    if remaining is None:
        return default_s
    return max(0.001, min(default_s, remaining))


async def check_health(addr: str, service: str = "", timeout_s: float = 2.0) -> str:
    """The health status name of `service` at `addr` ("SERVING", "NOT_SERVING", "UNREACHABLE")."""
    async with open_channel(addr) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            reply = await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout_s)
        except grpc.aio.AioRpcError:
            return "UNREACHABLE"
        return health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)

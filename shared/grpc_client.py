"""Channels to peer services (TLS, trace context, bearer token as configured), and deadline propagation."""

from __future__ import annotations

import json

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from shared.security.auth import bearer_token_interceptors, load_api_token
from shared.security.tls import channel_credentials, channel_options, load_tls
from shared.settings import SecuritySettings
from shared.telemetry import tracing

CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", 32 * 1024 * 1024),
    ("grpc.max_send_message_length", 32 * 1024 * 1024),
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.enable_retries", 1),
    # Peers start in any order (a launcher, a cluster): a refused first connect is retried within
    # 100 ms-2 s instead of gRPC's default 1-120 s backoff, during which every call fails at once.
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 2000),
    # A call that finds its peer not (yet) reachable is retried a few times instead of failing at once.
    ("grpc.service_config", json.dumps({"methodConfig": [{"name": [{}], "retryPolicy": {
        "maxAttempts": 4, "initialBackoff": "0.1s", "maxBackoff": "1s", "backoffMultiplier": 2,
        "retryableStatusCodes": ["UNAVAILABLE"]}}]})),
]


def open_channel(addr: str, *, security: SecuritySettings | None = None, bearer_token: str | None = None,
                 own_connection: bool = False) -> grpc.aio.Channel:
    """A channel to `addr`: TLS when `security` (default: COVEL_TLS_* from the environment) configures
    a certificate or CA, the trace context on every call while tracing is on, and `bearer_token`
    as `authorization` metadata when given. `own_connection`: do not share the connection (and its
    reconnect backoff) with other channels to the same address, e.g. for a poller that starts early."""
    tls = load_tls(security if security is not None else SecuritySettings())
    interceptors = [*tracing.client_interceptors(), *(bearer_token_interceptors(bearer_token) if bearer_token else ())]
    options = CHANNEL_OPTIONS + ([("grpc.use_local_subchannel_pool", 1)] if own_connection else [])
    if tls is None:
        return grpc.aio.insecure_channel(addr, options=options, interceptors=interceptors or None)
    return grpc.aio.secure_channel(
        addr, channel_credentials(tls), options=options + channel_options(tls), interceptors=interceptors or None
    )


def open_client_api_channel(addr: str, *, security: SecuritySettings | None = None) -> grpc.aio.Channel:
    """A channel to the scheduler's client API that sends COVEL_API_TOKEN (or _FILE) when one is set."""
    security = security if security is not None else SecuritySettings()
    return open_channel(addr, security=security, bearer_token=load_api_token(security))


def remaining_timeout(context: grpc.aio.ServicerContext | None, default_s: float) -> float:
    """The time left on the caller's deadline, so outgoing calls never outlive it."""
    if context is None:
        return default_s
    remaining = context.time_remaining()
    if remaining is None:
        return default_s
    return max(0.001, min(default_s, remaining))


async def check_health(addr: str, service: str = "", timeout_s: float = 2.0, *, security: SecuritySettings | None = None) -> str:
    """The health status name of `service` at `addr` ("SERVING", "NOT_SERVING", "UNREACHABLE")."""
    async with open_channel(addr, security=security) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            reply = await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout_s)
        except grpc.aio.AioRpcError:
            return "UNREACHABLE"
        return health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)

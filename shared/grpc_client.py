"""Channels to peer services (TLS, trace context, bearer token as configured), and deadline propagation."""

from __future__ import annotations

import json

import grpc
from google.protobuf.descriptor import FileDescriptor
from grpc_health.v1 import health_pb2, health_pb2_grpc

from covel.gateway.v1 import gateway_pb2
from covel.hooks.v1 import hooks_pb2
from covel.registry.v1 import registry_pb2
from covel.scheduler.v1 import scheduler_pb2
from covel.store.v1 import store_pb2
from shared.security.auth import bearer_token_interceptors, load_api_token
from shared.security.tls import channel_credentials, channel_options, load_tls
from shared.settings import SecuritySettings
from shared.telemetry import tracing

# Which calls a channel re-sends when it gets UNAVAILABLE (docs/retries.md). Only calls that are
# safe to run twice: a server that answered UNAVAILABLE may have done part of the work, and a
# re-sent Generate would start a fresh request budget (issue 16). Reads retry by their name:
READ_PREFIXES = ("Get", "List", "Watch", "Resolve", "Validate", "Check")
# and these writes, whose repeat leaves the same state and the same answer:
IDEMPOTENT_WRITES = {
    "covel.store.v1.TransactionalStore/RenewTurnLease": "sets the lease's deadline to now + ttl",
    "covel.store.v1.TransactionalStore/ReleaseTurnLease": "releasing a lease that is gone does nothing",
    "covel.store.v1.TransactionalStore/UpdateSessionApprovals": "approve and revoke name the plugins, they do not count",
    "covel.registry.v1.PluginRegistry/Reload": "rescans the plugin folders",
    "covel.hooks.v1.HookDispatcher/Reload": "loads the registry's current catalogue",
}
# Every other call is sent once. gRPC's transparent retry still re-sends a call that never left the
# client (the server never saw it), so that needs no policy; a call made while its peer is not
# reachable fails at once with UNAVAILABLE, and the reconnect backoff below keeps that short.
SERVICE_FILES: tuple[FileDescriptor, ...] = (
    gateway_pb2.DESCRIPTOR, hooks_pb2.DESCRIPTOR, registry_pb2.DESCRIPTOR, scheduler_pb2.DESCRIPTOR, store_pb2.DESCRIPTOR,
    health_pb2.DESCRIPTOR,
)
RETRY_POLICY = {"maxAttempts": 4, "initialBackoff": "0.1s", "maxBackoff": "1s", "backoffMultiplier": 2,
                "retryableStatusCodes": ["UNAVAILABLE"]}


def retry_safe(service: str, method: str) -> bool:
    """Whether `service`/`method` (full service name, method name) may be re-sent on UNAVAILABLE."""
    return method.startswith(READ_PREFIXES) or f"{service}/{method}" in IDEMPOTENT_WRITES


def retried_methods() -> list[tuple[str, str]]:
    """(service, method) of every method in our protos and the health service that channels retry."""
    return [
        (service.full_name, method.name)
        for file in SERVICE_FILES
        for service in file.services_by_name.values()
        for method in service.methods
        if retry_safe(service.full_name, method.name)
    ]


def service_config() -> str:
    """The channels' gRPC service config: the retry policy for the retry-safe methods only."""
    names = [{"service": service, "method": method} for service, method in retried_methods()]
    return json.dumps({"methodConfig": [{"name": names, "retryPolicy": RETRY_POLICY}]})


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
    ("grpc.service_config", service_config()),
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

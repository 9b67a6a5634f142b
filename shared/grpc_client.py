"""Channels to peer services: each method's deadline and retry rule, TLS, trace context and bearer token as configured."""

from __future__ import annotations

import json
from dataclasses import dataclass

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
    "covel.hooks.v1.HookDispatcher/LoadApprovedPlugins": "loads each named plugin once; a loaded one is left as it is",
    "covel.store.v1.TransactionalStore/PutMemoryVectors": "puts each record's vector in place of the one it had",
    "covel.store.v1.TransactionalStore/SearchMemoryVectors": "a read: ranks the vectors kept, changes none",
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


@dataclass(frozen=True)
class Deadline:
    """How long one call may take before it ends DEADLINE_EXCEEDED (None: no limit), and what that bounds."""

    seconds: float | None
    bounds: str


# Per-method deadlines (docs/retries.md), set by every channel on a call that passes no timeout=,
# so call sites pass none. A caller that passes one decides (a value it computes: a budget's rest,
# a lease's interval). Streams that last a turn or a connection have none. Not the service
# config's methodConfig "timeout": grpcio ends such calls a constant 1-2 s early (grpc/grpc#34547,
# #40633: a 5 s deadline ended after 3.2 s here) and does not send that deadline to the server.
STORE_CALL = Deadline(10, "one store read or write")
TURN_COMMIT = Deadline(30, "a turn's commit: every proposal applied in one transaction")
LEASE_CHORE = Deadline(5, "a lease's release or signal poll, repeated while the turn runs")
PEER_READ = Deadline(10, "one read or change of a peer's tables")
CACHE_REFRESH = Deadline(5, "a table the scheduler caches for a few seconds, read again")
PLUGIN_CALL = Deadline(60, "a plugin's hook handlers, tool or service, run in the hooks service")
PLUGIN_RESCAN = Deadline(120, "a scan or check of plugin folders or packages, importing their code")
WATCH_STREAM = Deadline(None, "a stream that lasts as long as its watcher")


def _caller(why: str) -> Deadline:
    return Deadline(None, f"set per call: {why}")


# service -> (the deadline of its methods not named, {method: deadline})
DEADLINES: dict[str, tuple[Deadline, dict[str, Deadline]]] = {
    "covel.gateway.v1.LlmGateway": (PEER_READ, {
        "Generate": _caller("the runtime's timeoutMs, or what a function's timeoutMs has left"),
        "GenerateOnce": _caller("the runtime's timeoutMs, or what a function's timeoutMs has left"),
        "Embed": _caller("memory-search: 10 s for the query, 30 s for the records the index lacks"),
        "TurnModelCalls": Deadline(None, "a stream that lasts one turn; each of its calls carries its own timeout (timeout_ms)"),
    }),
    "covel.hooks.v1.HookDispatcher": (PEER_READ, {
        "GetSubscriptions": CACHE_REFRESH, "ListTools": CACHE_REFRESH, "ListEventKeys": CACHE_REFRESH,
        "Dispatch": PLUGIN_CALL, "DispatchObserved": PLUGIN_CALL, "CallTool": PLUGIN_CALL, "CallService": PLUGIN_CALL, "ValidateForm": PLUGIN_CALL, "CallAction": PLUGIN_CALL,
        "CallExtension": _caller("the extension point's timeoutMs + 10 s"),
        "TurnHooks": Deadline(None, "a stream that lasts one turn; each of its calls carries its own timeout (timeout_ms)"),
        "StreamModelAnswer": _caller("the model call's time left, as a gateway stream's; each piece its idleTimeoutMs"),
        "EmitEvent": _caller("a bounded key's budget left + 0.5 s, an awaited key 60 s"),
        "Reload": PLUGIN_RESCAN, "LoadApprovedPlugins": PLUGIN_CALL,
    }),
    "covel.registry.v1.PluginRegistry": (PEER_READ, {
        "Reload": PLUGIN_RESCAN, "InstallPackage": PLUGIN_RESCAN, "ValidatePackage": PLUGIN_RESCAN,
        "WatchCatalogue": WATCH_STREAM,
    }),
    "covel.scheduler.v1.Scheduler": (Deadline(None, "set by the client: its calls run hooks and whole turns, which the scheduler bounds"), {}),
    "covel.store.v1.TransactionalStore": (STORE_CALL, {
        "CommitTurn": TURN_COMMIT, "ReleaseTurnLease": LEASE_CHORE, "TakeTurnSignals": LEASE_CHORE,
        "AcquireTurnLease": _caller("the lease wait (COVEL_SCHEDULER_LEASE_WAIT_MS) + 10 s"),
        "RenewTurnLease": _caller("a third of the lease's ttl, its renewal interval"),
        "RenewDetachedJob": _caller("a third of the job lease's ttl, its renewal interval"),
        "HookStateCalls": Deadline(None, "a stream the hooks service keeps open; each of its calls carries its own timeout"),
    }),
    # Probes choose their own (check_health's timeout_s, COVEL_PROBE_TIMEOUT_S).
    "grpc.health.v1.Health": (_caller("the probe's timeout"), {}),
}


def retry_safe(service: str, method: str) -> bool:
    """Whether `service`/`method` (full service name, method name) may be re-sent on UNAVAILABLE."""
    return method.startswith(READ_PREFIXES) or f"{service}/{method}" in IDEMPOTENT_WRITES


def proto_methods() -> list[tuple[str, str, bool]]:
    """(service, method, streams its replies) of every method in our protos and the health service."""
    return [
        (service.full_name, method.name, method.server_streaming)
        for file in SERVICE_FILES
        for service in file.services_by_name.values()
        for method in service.methods
    ]


def all_methods() -> list[tuple[str, str]]:
    """(service, method) of every method in our protos and the health service."""
    return [(service, method) for service, method, _ in proto_methods()]


def retried_methods() -> list[tuple[str, str]]:
    """(service, method) of every method in our protos and the health service that channels retry."""
    return [(service, method) for service, method in all_methods() if retry_safe(service, method)]


def deadline_of(service: str, method: str) -> Deadline:
    """The deadline a channel gives `service`/`method` (full service name, method name)."""
    default, methods = DEADLINES[service]
    return methods.get(method, default)


def _deadlines_by_path() -> dict[str, float]:
    """`/service/method` -> seconds of every method with a deadline. Refuses a misspelt method (it
    would silently get none) and a deadline on a stream (a stream's caller bounds it)."""
    methods = proto_methods()
    known = {(service, method) for service, method, _ in methods}
    unknown = [f"{service}/{method}" for service, (_, named) in DEADLINES.items() for method in named
               if (service, method) not in known]
    untabled = sorted({service for service, _ in known} - DEADLINES.keys())
    streams = [f"{service}/{method}" for service, method, streamed in methods
               if streamed and deadline_of(service, method).seconds is not None]
    if unknown or untabled or streams:
        raise LookupError(f"shared/grpc_client.py DEADLINES: no such method {unknown}, services without a table "
                          f"{untabled}, streams with a deadline {streams}")
    by_path = {f"/{service}/{method}": deadline_of(service, method).seconds for service, method in known}
    return {path: seconds for path, seconds in by_path.items() if seconds is not None}


class _TableDeadline(grpc.aio.UnaryUnaryClientInterceptor):
    """Gives a unary call without a timeout its method's deadline from DEADLINES."""

    def __init__(self) -> None:
        self._deadlines = _deadlines_by_path()

    async def intercept_unary_unary(self, continuation, client_call_details, request):
        details = client_call_details
        method = details.method.decode() if isinstance(details.method, bytes) else details.method
        seconds = self._deadlines.get(method)
        if details.timeout is None and seconds is not None:
            details = grpc.aio.ClientCallDetails(details.method, seconds, details.metadata, details.credentials,
                                                 details.wait_for_ready)
        return await continuation(details, request)


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
TABLE_DEADLINE = _TableDeadline()


def open_channel(addr: str, *, security: SecuritySettings | None = None, bearer_token: str | None = None,
                 own_connection: bool = False) -> grpc.aio.Channel:
    """A channel to `addr`: TLS when `security` (default: COVEL_TLS_* from the environment) configures
    a certificate or CA, each method's deadline (DEADLINES) on a call without a timeout, the trace
    context on every call while tracing is on, and `bearer_token` as `authorization` metadata when
    given. `own_connection`: do not share the connection (and its reconnect backoff) with other
    channels to the same address, e.g. for a poller that starts early."""
    tls = load_tls(security if security is not None else SecuritySettings())
    interceptors = [TABLE_DEADLINE, *tracing.client_interceptors(),
                    *(bearer_token_interceptors(bearer_token) if bearer_token else ())]
    options = CHANNEL_OPTIONS + ([("grpc.use_local_subchannel_pool", 1)] if own_connection else [])
    if tls is None:
        return grpc.aio.insecure_channel(addr, options=options, interceptors=interceptors)
    names = channel_options(tls)
    if not names and addr.startswith(("unix:", "unix-abstract:")):
        # A socket path is no host name: check the server's certificate for localhost, as a local service's has.
        names = [("grpc.ssl_target_name_override", "localhost")]
    return grpc.aio.secure_channel(addr, channel_credentials(tls), options=options + names, interceptors=interceptors)


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
    return (await health_of(addr, service, timeout_s, security=security))[0]


async def health_of(addr: str, service: str = "", timeout_s: float = 2.0, *,
                    security: SecuritySettings | None = None) -> tuple[str, grpc.aio.AioRpcError | None]:
    """check_health's status name and, when it is UNREACHABLE, the error the call ended with."""
    async with open_channel(addr, security=security) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            reply = await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout_s)
        except grpc.aio.AioRpcError as error:
            return "UNREACHABLE", error
        return health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status), None

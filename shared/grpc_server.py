"""One way to run a service: grpc.aio server, health, reflection, graceful SIGTERM, and the
cross-cutting parts every service shares: TLS, tracing and metrics interceptors, /metrics."""

from __future__ import annotations

import asyncio
import errno
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from shared.decode_guard import DecodeGuardInterceptor
from shared.logs import get_logger
from shared.reflection import enable_reflection
from shared.security.service_identity import CallerPolicyInterceptor
from shared.security.tls import listening_credentials, load_tls
from shared.settings import ServiceSettings
from shared.telemetry import metrics, tracing
from shared.telemetry.log_context import LogContextInterceptor

ShutdownHook = Callable[[], Awaitable[None]]
# Given the seconds left of the shutdown budget; runs alongside the in-flight RPCs' grace.
DrainHook = Callable[[float], Awaitable[None]]

# gRPC sets SO_REUSEPORT on listening sockets by default: a second server (another process, another
# test run) could then bind a port already in use and silently take half its connections. Off, a
# taken port fails the bind loudly (OSError below) and the caller picks another.
EXCLUSIVE_PORT = ("grpc.so_reuseport", 0)
# Our channels ping every 30 s while a call is open (shared/grpc_client.py keepalive_time_ms); a server takes a ping
# at most every 5 min by default and answers a third one sooner with GOAWAY, which ended every long stream (a
# catalogue watch, WatchSession, the hooks service's state stream) every few minutes. Pings every 20 s are fine.
KEEPALIVE_PERMITTED = [("grpc.http2.min_ping_interval_without_data_ms", 20_000)]


@dataclass
class RunningServer:
    server: grpc.aio.Server
    health: health.aio.HealthServicer
    service_names: Sequence[str]
    port: int
    # At SIGTERM, in order, after health turns NOT_SERVING: quick announcements, each bounded by itself.
    on_shutdown: list[ShutdownHook] = field(default_factory=list)
    # Then, concurrently with the in-flight RPCs' grace, each given the seconds left: work that is
    # not an RPC (turns that outlive their stream, background jobs).
    on_drain: list[DrainHook] = field(default_factory=list)
    # Once no RPC runs any more: close what they used (peer channels, providers).
    on_stopped: list[ShutdownHook] = field(default_factory=list)
    # The plaintext health-only server (COVEL_HEALTH_PORT), and its port.
    health_server: grpc.aio.Server | None = None
    health_port: int | None = None

    async def set_serving(self, serving: bool) -> None:
        """Readiness: the overall status and the services'. LIVENESS stays SERVING: a pod that cannot
        reach its database or peers for a while is taken out of its Service, not restarted."""
        state = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
        for name in ("", *self.service_names):
            await self.health.set(name, state)

    def watch_readiness(self, check: Callable[[], Awaitable[bool]], interval_s: float, what: str) -> None:
        """Every `interval_s`, `check()` decides readiness (set_serving); stopped with the server."""
        log = get_logger()

        async def watch() -> None:
            ready = True
            while True:
                await asyncio.sleep(interval_s)
                try:
                    now = await asyncio.wait_for(check(), interval_s)
                except Exception:  # a check that fails or hangs: not ready
                    now = False
                if now != ready:
                    ready = now
                    log.warning("readiness.changed", ready=ready, depends_on=what)
                    await self.set_serving(ready)

        task = asyncio.create_task(watch(), name="readiness")

        async def stop_watching() -> None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

        self.on_shutdown.insert(0, stop_watching)

    async def stop(self, grace_s: float) -> None:
        """Shut down within `grace_s` overall: every step shares one deadline, so the whole stop fits
        the budget the pod's terminationGracePeriodSeconds was sized for (deploy/check.py)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace_s

        def left() -> float:
            return max(0.0, deadline - loop.time())

        # Report NOT_SERVING first so load balancers stop sending, then let in-flight RPCs finish.
        await self.health.enter_graceful_shutdown()
        # Not cut short (each has a budget of its own, e.g. gateway:shutdown's 5 s); their time counts against the deadline.
        for hook in self.on_shutdown:
            await hook()
        outcomes = await asyncio.gather(self.server.stop(left()), *(drain(left()) for drain in self.on_drain),
                                        return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, Exception):
                get_logger().warning("service.drain_failed", error=repr(outcome))
        for hook in self.on_stopped:
            await hook()
        if self.health_server is not None:
            await self.health_server.stop(0)
        # Spans still buffered are exported before the process exits.
        tracing.shutdown_tracing()
        metrics.stop_metrics_server()


def _host_of(addr: str) -> str:
    """The host the side ports (metrics, health) listen on: the service's own, loopback for a unix socket."""
    if addr.startswith(("unix:", "unix-abstract:")):
        return "127.0.0.1"
    host = addr.rpartition(":")[0].strip("[]")
    return host or "0.0.0.0"


def _with_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class AddressInUse(OSError):
    """The server could not bind its address: taken by another process, or not a local address."""


def _bind(server: grpc.aio.Server, addr: str, credentials: grpc.ServerCredentials | None, *, what: str = "") -> int:
    try:
        port = server.add_secure_port(addr, credentials) if credentials is not None else server.add_insecure_port(addr)
    except RuntimeError as error:  # grpcio raises "Failed to bind to address ..." (older versions returned 0)
        raise AddressInUse(errno.EADDRINUSE, f"could not bind {what}{addr}: the address is in use or not local ({error})") from None
    if port == 0:
        raise AddressInUse(errno.EADDRINUSE, f"could not bind {what}{addr}: the address is in use or not local")
    return port


async def _start_health_server(addr: str, health_servicer: health.aio.HealthServicer) -> tuple[grpc.aio.Server, int]:
    """Only the health service, without TLS: what a probe that cannot present a certificate calls."""
    server = grpc.aio.server(options=[EXCLUSIVE_PORT])
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    port = _bind(server, addr, None, what="the health port ")
    await server.start()
    return server, port


async def start_server(
    addr: str,
    add_servicers: Callable[[grpc.aio.Server], Sequence[str]],
    *,
    interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
    settings: ServiceSettings | None = None,
    service: str = "",
) -> RunningServer:
    """Bind `addr` (port 0 picks a free one), add the services, health and reflection.

    `settings` (default: read from the environment) say whether to serve TLS; with `service`
    named, they also turn on tracing and the /metrics endpoint for this process, and every method
    runs only for the callers shared/security/policy.py names.
    """
    settings = settings if settings is not None else ServiceSettings()
    tls = load_tls(settings)
    credentials = listening_credentials(tls)
    observers: list[grpc.aio.ServerInterceptor] = []
    policy: list[grpc.aio.ServerInterceptor] = [CallerPolicyInterceptor()] if service else []
    if service:
        tracing.configure_tracing(service, settings)
        observers.extend(tracing.server_interceptors())
        if metrics.start_metrics_server(service, settings, _host_of(addr)) is not None:
            observers.append(metrics.RpcMetricsInterceptor())
    server = grpc.aio.server(
        # Tracing outermost, so a refused call (caller policy, bearer token) is still traced and
        # counted; then the request's session and turn ids bound to every log line of the call; the
        # caller's certificate against the policy; innermost, the guard that answers an undecodable
        # request with INVALID_ARGUMENT.
        interceptors=[*observers, LogContextInterceptor(), *policy, *interceptors, DecodeGuardInterceptor()],
        options=[
            ("grpc.max_receive_message_length", 32 * 1024 * 1024),
            ("grpc.max_send_message_length", 32 * 1024 * 1024),
            EXCLUSIVE_PORT,
            *KEEPALIVE_PERMITTED,
        ],
    )
    service_names = list(add_servicers(server))
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    enable_reflection([*service_names, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name], server)
    port = _bind(server, addr, credentials)
    await server.start()
    running = RunningServer(server=server, health=health_servicer, service_names=service_names, port=port)
    # What a liveness probe asks (`grpc: {service: liveness}`): SERVING while the process serves at all.
    await health_servicer.set(LIVENESS, health_pb2.HealthCheckResponse.SERVING)
    health_port = settings.health_port_of(service) if service else None
    if health_port is not None:
        try:
            running.health_server, running.health_port = await _start_health_server(
                _with_port(_host_of(addr), health_port), health_servicer
            )
        except AddressInUse:
            await server.stop(0)
            raise
    await running.set_serving(True)
    if service:
        get_logger().info(
            "service.security", tls=credentials is not None,
            client_certificates=bool(credentials and tls and tls.root_ca and tls.require_client_cert), caller_policy=bool(policy),
            tracing=tracing.enabled(), metrics_port=metrics.serving_port(), health_port=running.health_port,
        )
    return running


# The health service name a liveness probe asks: SERVING until shutdown, whatever readiness says.
LIVENESS = "liveness"
# The exit status of a service whose address another process holds (EADDRINUSE), so a supervisor can tell.
EXIT_ADDRESS_IN_USE = 98


def run_service(main: Callable[[], Awaitable[None]]) -> None:
    """asyncio.run(main()), except that a service that cannot bind its address says so and exits at once with
    EXIT_ADDRESS_IN_USE: what it started before the bind (peer channels, watchers, the sandbox's zygote) would
    otherwise keep the process alive, not serving, until a supervisor gives up."""

    async def bound() -> None:
        try:
            await main()
        except AddressInUse as error:
            get_logger().error("service.bind_failed", error=str(error))
            print(f"{error}", file=sys.stderr, flush=True)
            os._exit(EXIT_ADDRESS_IN_USE)

    asyncio.run(bound())


async def serve_until_signalled(running: RunningServer, service: str, grace_s: float) -> None:
    """Block until SIGTERM/SIGINT, then shut down gracefully."""
    log = get_logger()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    log.info("service.listening", port=running.port)
    # Machine-readable line for launchers that asked for port 0 (on stderr: stdout is the JSON log).
    print(f"COVEL_READY {service} {running.port}", file=sys.stderr, flush=True)
    await stop.wait()
    log.info("service.stopping", grace_s=grace_s)
    await running.stop(grace_s)
    log.info("service.stopped")

"""Prometheus metrics of the services and the /metrics endpoint.

Nothing is recorded, served or intercepted unless a metrics port is configured
(`COVEL_METRICS_PORT` or `COVEL_<SERVICE>_METRICS_PORT`): then the process serves /metrics,
records the domain metrics below and counts every RPC with a server interceptor.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

import grpc
from prometheus_client import Counter, Gauge, Histogram, start_http_server

from shared.hook_events import HANDLER_FAULTS
from shared.logs import get_logger
from shared.settings import TelemetrySettings

_state: dict = {"server": None, "port": None}

# Turns take tens of milliseconds with the scripted model and minutes with a slow real one.
TURN_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
HOOK_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
MODEL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 240)
RPC_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)

# scheduler
TURN_DURATION = Histogram(
    "covel_turn_duration_seconds", "Wall time of one turn, lease to commit.", ("origin", "status"), buckets=TURN_BUCKETS
)
# hooks
HOOK_DURATION = Histogram(
    "covel_hook_handler_duration_seconds", "Time one hook handler took.", ("plugin", "event"), buckets=HOOK_BUCKETS
)
HOOK_FAILURES = Counter(
    "covel_hook_handler_failures_total", "Hook handlers that raised, timed out or returned an invalid result.",
    ("plugin", "event", "status"),
)
# gateway
MODEL_CALL_DURATION = Histogram(
    "covel_model_call_duration_seconds", "One logical model call, retries and fallbacks included.",
    ("slot", "provider", "outcome"), buckets=MODEL_BUCKETS,
)
MODEL_CALL_RETRIES = Counter(
    "covel_model_call_retries_total", "HTTP attempts past the first of each model call.", ("slot", "provider")
)
MODEL_TOKENS = Counter("covel_model_tokens_total", "Tokens the providers reported.", ("slot", "provider", "kind"))
# store
COMMITS = Counter("covel_store_commits_total", "Turns the store recorded, by turn status.", ("status",))
PROPOSALS = Counter("covel_store_proposals_total", "Proposals of committed turns, by outcome.", ("outcome",))
DETACHED_JOBS = Gauge("covel_detached_jobs", "Detached jobs queued or running, as the queue's last poll saw them.", ("status",))
DETACHED_OLDEST = Gauge("covel_detached_oldest_queued_seconds", "How long the oldest queued detached job has waited (0: none).")
# sandbox: whether plugin code has a network namespace of its own (set by a service's first worker)
PLUGIN_PAUSES = Counter("covel_hook_plugin_pauses_total", "Plugins the fault breaker paused in a session.", ("plugin",))
STREAM_CALLS = Counter("covel_stream_calls_total", "Calls a turn's call stream carried (TurnHooks, TurnModelCalls), by kind.", ("method", "kind"))
SANDBOX_FAULTS = Counter("covel_sandbox_worker_faults_total", "Sandbox workers stopped for a fault (timeout, exit, bad frame).", ("plugin",))
SANDBOX_NETWORK_ISOLATED = Gauge("covel_sandbox_network_isolated", "1: sandbox workers have no network of their own; 0: they share the service's.",
                                 ("service",))
# web front: per route template (bounded labels), the HTTP status; a streamed route until its first event
WEB_REQUESTS = Counter("covel_web_requests_total", "HTTP API requests the web front answered.", ("method", "route", "status"))
WEB_DURATION = Histogram(
    "covel_web_request_duration_seconds", "Time to answer an API request (a streamed turn: until its first event).",
    ("method", "route"), buckets=RPC_BUCKETS,
)
# every service
RPC_STARTED = Counter("grpc_server_started_total", "RPCs started on the server.", ("grpc_service", "grpc_method", "grpc_type"))
RPC_HANDLED = Counter(
    "grpc_server_handled_total", "RPCs completed on the server, by status code.",
    ("grpc_service", "grpc_method", "grpc_type", "grpc_code"),
)
# Messages a server stream sent (bench/turn_latency.py reads it: messages per Generate stream).
RPC_MSG_SENT = Counter(
    "grpc_server_msg_sent_total", "Messages server streams sent.", ("grpc_service", "grpc_method", "grpc_type")
)
RPC_DURATION = Histogram(
    "grpc_server_handling_seconds", "Time to answer an RPC (for streams: until the last message).",
    ("grpc_service", "grpc_method", "grpc_type"), buckets=RPC_BUCKETS,
)


def enabled() -> bool:
    return _state["server"] is not None


def serving_port() -> int | None:
    return _state["port"]


def start_metrics_server(service: str, settings: TelemetrySettings, default_host: str) -> int | None:
    """Serve /metrics when a port is configured; the port it listens on, or None."""
    port = settings.metrics_port_of(service)
    if port is None or _state["server"] is not None:
        return _state["port"]
    host = settings.metrics_host or default_host
    try:
        server, _thread = start_http_server(port, addr=host)
    except OSError as error:
        # The service still serves; only its /metrics is off, and its log says which setting to change.
        setting = f"COVEL_{service.upper()}_METRICS_PORT" if getattr(settings, f"{service}_metrics_port", None) is not None \
            else "COVEL_METRICS_PORT"
        get_logger().error("metrics.port_unavailable", port=port, host=host, setting=setting, error=error.strerror or str(error),
                           fix=f"give {service} a free port with {setting} (covel up gives each service COVEL_METRICS_PORT + its place)")
        return None
    _state.update(server=server, port=server.server_port)
    return _state["port"]


def stop_metrics_server() -> None:
    server = _state["server"]
    if server is not None:
        server.shutdown()
        server.server_close()
        _state.update(server=None, port=None)


# ----- recording helpers: the call sites stay one line -----------------------------------------

def record_sandbox_network(service: str, isolated: bool) -> None:
    """Set whether or not /metrics is served: the gauge is read at scrape time only."""
    SANDBOX_NETWORK_ISOLATED.labels(service).set(1 if isolated else 0)


def record_web_request(method: str, route: str, status: int, seconds: float) -> None:
    if enabled():
        WEB_REQUESTS.labels(method, route, str(status)).inc()
        WEB_DURATION.labels(method, route).observe(seconds)




# Each records only while this process serves /metrics: off, a turn pays one test per call.


def record_turn(origin: str, status: str, seconds: float) -> None:
    if _state["server"] is None:
        return
    TURN_DURATION.labels(origin, status).observe(seconds)


def record_plugin_pauses(plugin_ids: Iterable[str]) -> None:
    if _state["server"] is None:
        return
    for plugin_id in plugin_ids:
        PLUGIN_PAUSES.labels(plugin_id).inc()


def record_stream_call(method: str, kind: str) -> None:
    if _state["server"] is None:
        return
    STREAM_CALLS.labels(method, kind).inc()


def record_sandbox_fault(plugin_id: str) -> None:
    if _state["server"] is None:
        return
    SANDBOX_FAULTS.labels(plugin_id).inc()


def record_hook_trace(trace: Iterable) -> None:
    """Each handler's time and failure from a dispatch's trace entries (event, handler_plugin_id, status, duration_us)."""
    if _state["server"] is None:
        return
    for entry in trace:
        HOOK_DURATION.labels(entry.handler_plugin_id, entry.event).observe(entry.duration_us / 1e6)
        if entry.status in HANDLER_FAULTS:
            HOOK_FAILURES.labels(entry.handler_plugin_id, entry.event, entry.status).inc()


def record_model_call(slot: str, provider: str, outcome: str, seconds: float, attempts: int, prompt_tokens: int,
                      completion_tokens: int) -> None:
    if _state["server"] is None:
        return
    MODEL_CALL_DURATION.labels(slot, provider, outcome).observe(seconds)
    if attempts > 1:
        MODEL_CALL_RETRIES.labels(slot, provider).inc(attempts - 1)
    if prompt_tokens:
        MODEL_TOKENS.labels(slot, provider, "prompt").inc(prompt_tokens)
    if completion_tokens:
        MODEL_TOKENS.labels(slot, provider, "completion").inc(completion_tokens)


def record_commit(status: str, proposal_outcomes: Iterable[str]) -> None:
    if _state["server"] is None:
        return
    COMMITS.labels(status).inc()
    for outcome in proposal_outcomes:
        PROPOSALS.labels(outcome).inc()


def record_detached_queue(queued: int, running: int, oldest_queued_s: float) -> None:
    if _state["server"] is None:
        return
    DETACHED_JOBS.labels("queued").set(queued)
    DETACHED_JOBS.labels("running").set(running)
    DETACHED_OLDEST.set(oldest_queued_s)


# ----- per-RPC counters ------------------------------------------------------------------------


def _split(method: str) -> tuple[str, str]:
    service, _, name = method.lstrip("/").rpartition("/")
    return service, name


_CODE_NAMES = {code.value[0]: code.name for code in grpc.StatusCode}


def _code_of(context: grpc.aio.ServicerContext, error: BaseException | None) -> str:
    """The status the RPC ended with: what the handler set or aborted with, else from the exception."""
    code = context.code()
    if isinstance(code, grpc.StatusCode):
        return code.name
    if isinstance(code, int):
        return _CODE_NAMES.get(code, "UNKNOWN")
    if error is None:
        return "OK"
    return "CANCELLED" if isinstance(error, asyncio.CancelledError) else "UNKNOWN"


class RpcMetricsInterceptor(grpc.aio.ServerInterceptor):
    """grpc_server_started_total, grpc_server_handled_total and grpc_server_handling_seconds per method."""

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        if handler is None or handler_call_details.method.startswith("/grpc.health.v1.Health/"):
            return handler
        service, method = _split(handler_call_details.method)
        if handler.unary_unary:
            return grpc.unary_unary_rpc_method_handler(
                _unary(handler.unary_unary, service, method, "unary"),
                request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer,
            )
        if handler.unary_stream and inspect.isasyncgenfunction(handler.unary_stream):
            return grpc.unary_stream_rpc_method_handler(
                _streaming(handler.unary_stream, service, method, "server_stream"),
                request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer,
            )
        if handler.stream_stream and inspect.isasyncgenfunction(handler.stream_stream):
            return grpc.stream_stream_rpc_method_handler(
                _streaming(handler.stream_stream, service, method, "bidi_stream"),
                request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer,
            )
        # Client streams (reflection): not counted; none of our APIs has them.
        return handler


def _unary(
    behavior: Callable[[Any, grpc.aio.ServicerContext], Awaitable[Any]], service: str, method: str, kind: str
) -> Callable[[Any, grpc.aio.ServicerContext], Awaitable[Any]]:
    async def observed(request: Any, context: grpc.aio.ServicerContext) -> Any:
        RPC_STARTED.labels(service, method, kind).inc()
        started = time.perf_counter()
        error: BaseException | None = None
        try:
            return await behavior(request, context)
        except BaseException as raised:
            error = raised
            raise
        finally:
            RPC_DURATION.labels(service, method, kind).observe(time.perf_counter() - started)
            RPC_HANDLED.labels(service, method, kind, _code_of(context, error)).inc()

    return observed


def _streaming(
    behavior: Callable[[Any, grpc.aio.ServicerContext], AsyncIterator[Any]], service: str, method: str, kind: str
) -> Callable[[Any, grpc.aio.ServicerContext], AsyncIterator[Any]]:
    async def observed(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        RPC_STARTED.labels(service, method, kind).inc()
        sent = RPC_MSG_SENT.labels(service, method, kind)
        started = time.perf_counter()
        error: BaseException | None = None
        try:
            async for item in behavior(request, context):
                yield item
                sent.inc()
        except BaseException as raised:
            error = raised
            raise
        finally:
            RPC_DURATION.labels(service, method, kind).observe(time.perf_counter() - started)
            RPC_HANDLED.labels(service, method, kind, _code_of(context, error)).inc()

    return observed

"""OpenTelemetry tracing: one trace per execution (turn) across the five services.

Off by default (`COVEL_TRACES_EXPORTER` / `OTEL_TRACES_EXPORTER` = none): then no SDK is
loaded, no gRPC interceptor is installed and `traced`/`span` cost one flag test. On, every
service's gRPC server and client carry the W3C trace context in metadata (the
opentelemetry-instrumentation-grpc aio interceptors), so the scheduler's turn span is the
parent of the hooks', gateway's and store's spans. A detached job's execution starts a trace
of its own (`root_span`), linked to the turn that queued it (`trace_context`).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.context import Context

from shared.settings import TelemetrySettings

EXPORTERS = ("none", "otlp", "console")
_state: dict[str, Any] = {"enabled": False, "provider": None}
_tracer = trace.get_tracer("covel")
_NO_SPAN = contextlib.nullcontext(trace.INVALID_SPAN)
# RPCs never traced: health checks, and the detached-job queue's poll, which an idle scheduler
# makes every few hundred milliseconds (a claimed job's execution is traced from the claim on).
UNTRACED_METHODS = ("/grpc.health.v1.Health/", "/covel.store.v1.TransactionalStore/ClaimDetachedJob")

Attributes = Mapping[str, str | int | float | bool]


class TracingConfigError(ValueError):
    pass


def enabled() -> bool:
    return _state["enabled"]


def exporter_names(settings: TelemetrySettings) -> list[str]:
    names = [name.strip().lower() for name in settings.traces_exporter.split(",") if name.strip()]
    for name in names:
        if name not in EXPORTERS:
            raise TracingConfigError(f"COVEL_TRACES_EXPORTER / OTEL_TRACES_EXPORTER: unknown exporter {name!r}; use {', '.join(EXPORTERS)}")
    return [name for name in names if name != "none"]


def _otlp_exporter():
    protocol = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf"
    # Endpoints, headers, timeouts and compression come from the OTEL_EXPORTER_OTLP_* variables.
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    elif protocol == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    else:
        raise TracingConfigError(f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r}: use http/protobuf or grpc")
    return OTLPSpanExporter()


def configure_tracing(service: str, settings: TelemetrySettings) -> bool:
    """Install the SDK's tracer provider with the configured exporters; False when tracing is off."""
    names = exporter_names(settings)
    if not names or _state["enabled"]:
        return _state["enabled"]
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    # OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win over the default name.
    resource = Resource.create({SERVICE_NAME: os.environ.get("OTEL_SERVICE_NAME") or f"covel-{service}", "covel.service": service})
    provider = TracerProvider(resource=resource)
    for name in names:
        # Console spans go to stderr, one JSON object a line: stdout is the service's JSON log.
        exporter = _otlp_exporter() if name == "otlp" else ConsoleSpanExporter(
            out=sys.stderr, formatter=lambda finished: finished.to_json(indent=None) + "\n")
        # Batching keeps export off the request path (OTEL_BSP_* tune it).
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    _state.update(enabled=True, provider=provider)
    return True


def shutdown_tracing() -> None:
    """Export what is still buffered (at SIGTERM)."""
    provider = _state["provider"]
    if provider is not None:
        provider.shutdown()
        _state.update(enabled=False, provider=None)


def _is_traced(details: object) -> bool:
    method = getattr(details, "method", "")
    if isinstance(method, bytes):
        method = method.decode()
    return not method.startswith(UNTRACED_METHODS)


def server_interceptors() -> list:
    if not _state["enabled"]:
        return []
    from opentelemetry.instrumentation.grpc import aio_server_interceptor

    return [aio_server_interceptor(filter_=_is_traced)]


def client_interceptors() -> list:
    if not _state["enabled"]:
        return []
    from opentelemetry.instrumentation.grpc import aio_client_interceptors

    return aio_client_interceptors(filter_=_is_traced)


def span(name: str, attributes: Attributes | None = None) -> contextlib.AbstractContextManager[Any]:
    """A child span of the current one as a context manager (a no-op span when tracing is off)."""
    if not _state["enabled"]:
        return _NO_SPAN
    return _tracer.start_as_current_span(name, attributes=attributes)


def root_span(name: str, attributes: Attributes | None = None, *, linked: Mapping[str, str] | None = None) -> contextlib.AbstractContextManager[Any]:
    """Like `span`, but the first span of a trace of its own whatever span is current, with a span
    link to the span whose W3C trace context `linked` carries (from `trace_context`), if any."""
    if not _state["enabled"]:
        return _NO_SPAN
    source = trace.get_current_span(propagate.extract(dict(linked or {}))).get_span_context()
    links = [trace.Link(source)] if source.is_valid else []
    return _tracer.start_as_current_span(name, context=Context(), attributes=attributes, links=links)


@contextlib.contextmanager
def continued(carrier: Mapping[str, str]) -> Iterator[None]:
    """Run the block in the trace whose W3C context `carrier` holds (a call that came as a stream's message, not with
    its own metadata); as it is while tracing is off or the carrier is empty."""
    if not _state["enabled"] or not any(carrier.values()):
        yield
        return
    token = otel_context.attach(propagate.extract(dict(carrier)))
    try:
        yield
    finally:
        otel_context.detach(token)


def trace_context() -> dict[str, str]:
    """The current span's W3C trace context (`traceparent`, ...) to keep with work that runs later;
    empty while tracing is off."""
    carrier: dict[str, str] = {}
    if _state["enabled"]:
        propagate.inject(carrier)
    return carrier


def current_span() -> trace.Span:
    return trace.get_current_span()


def current_trace_id() -> str:
    """The current trace's id in hex, "" without one (or with tracing off)."""
    ids = ids_of_current_span()
    return ids[0] if ids else ""


def ids_of_current_span() -> tuple[str, str] | None:
    """(trace id, span id) in hex of the current span, for log lines; None without one."""
    if not _state["enabled"]:
        return None
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return format(context.trace_id, "032x"), format(context.span_id, "016x")


def traced(
    name: str,
    attributes: Callable[..., Attributes] | None = None,
    result_attributes: Callable[[Any], Attributes] | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate an async function or async generator to run in a span named `name`.

    `attributes(*args, **kwargs)` and `result_attributes(result)` add attributes; both are
    only called while tracing is on. An exception marks the span as an error.
    """

    def decorate(function):
        if inspect.isasyncgenfunction(function):

            @functools.wraps(function)
            async def generator(*args, **kwargs):
                if not _state["enabled"]:
                    async for item in function(*args, **kwargs):
                        yield item
                    return
                # Not made current: a generator resumes in its consumer's context, where an attached
                # span could not be detached cleanly.
                with _tracer.start_span(name, attributes=attributes(*args, **kwargs) if attributes else None) as started:
                    async for item in function(*args, **kwargs):
                        yield item
                    started.set_attribute("covel.completed", True)

            return generator

        @functools.wraps(function)
        async def coroutine(*args, **kwargs):
            if not _state["enabled"]:
                return await function(*args, **kwargs)
            with _tracer.start_as_current_span(name, attributes=attributes(*args, **kwargs) if attributes else None) as started:
                result = await function(*args, **kwargs)
                if result_attributes is not None:
                    started.set_attributes(result_attributes(result))
                return result

        return coroutine

    return decorate

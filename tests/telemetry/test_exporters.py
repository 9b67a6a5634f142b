"""The other trace exporters: OTLP over gRPC to a real receiver, and the console; bad settings say what to use."""

from __future__ import annotations

import asyncio
import json
import os
import sys

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from shared.settings import REPO_ROOT, TelemetrySettings
from shared.telemetry.tracing import TracingConfigError, exporter_names

# A service process in miniature: configure tracing as start_server does, make one span, shut down (which exports).
EMIT_ONE_SPAN = """
from shared.settings import TelemetrySettings
from shared.telemetry import tracing
tracing.configure_tracing("probe", TelemetrySettings())
with tracing.span("covel.probe", {"covel.answer": 42}):
    pass
tracing.shutdown_tracing()
"""


async def _run_probe(env: dict[str, str]) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", EMIT_ONE_SPAN, cwd=REPO_ROOT, env={**os.environ, **env},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 30)
    return process.returncode, out.decode(), err.decode()


class Receiver(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self) -> None:
        self.requests: list[trace_service_pb2.ExportTraceServiceRequest] = []

    async def Export(self, request, context):  # noqa: N802 (the proto's name)
        self.requests.append(request)
        return trace_service_pb2.ExportTraceServiceResponse()


async def test_otlp_over_grpc_reaches_a_real_receiver():
    receiver = Receiver()
    server = grpc.aio.server()
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(receiver, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        code, _, err = await _run_probe({
            "OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}", "OTEL_EXPORTER_OTLP_INSECURE": "true",
        })
        assert code == 0, err
    finally:
        await server.stop(0)
    spans = [(rs.resource, span) for request in receiver.requests for rs in request.resource_spans
             for ss in rs.scope_spans for span in ss.spans]
    assert [span.name for _, span in spans] == ["covel.probe"]
    resource = {attr.key: attr.value.string_value for attr in spans[0][0].attributes}
    assert resource["service.name"] == "covel-probe"


async def test_the_console_exporter_prints_spans_to_stderr_and_otel_service_name_wins():
    code, out, err = await _run_probe({"COVEL_TRACES_EXPORTER": "console", "OTEL_SERVICE_NAME": "my-covel"})
    assert code == 0, err
    assert out == "", "stdout is the service's JSON log"
    [printed] = [json.loads(line) for line in err.splitlines()]
    assert printed["name"] == "covel.probe"
    assert printed["attributes"] == {"covel.answer": 42}
    assert printed["resource"]["attributes"]["service.name"] == "my-covel"


def test_exporter_settings():
    assert exporter_names(TelemetrySettings(traces_exporter="none")) == []
    assert exporter_names(TelemetrySettings(traces_exporter="otlp, console")) == ["otlp", "console"]
    with pytest.raises(TracingConfigError, match="unknown exporter 'jaeger'; use none, otlp, console"):
        exporter_names(TelemetrySettings(traces_exporter="jaeger"))

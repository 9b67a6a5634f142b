"""Traces, metrics and logs of the five services as real processes, after real turns."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import sys

import pytest_asyncio

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2
from covel_cli.launcher import SERVICES, ServiceGroup, free_port_addrs, own_metrics_port
from shared.grpc_client import open_channel
from shared.settings import REPO_ROOT
from tests.support.builtin_plugins import non_story_core_plugin_ids
from tests.telemetry.otlp_receiver import OtlpReceiver
from tests.telemetry.scrape import metric_value, scrape

PROBE_DIR = REPO_ROOT / "tests" / "fixtures" / "plugins"
CALLER_TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"


def _free_run(count: int) -> int:
    """The first of `count` consecutive ports free on the loopback now."""
    for _ in range(200):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            base = probe.getsockname()[1]
        if base + count >= 65536:
            continue
        try:
            with contextlib.ExitStack() as held:
                for port in range(base, base + count):
                    held.enter_context(socket.socket()).bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
    raise RuntimeError(f"no {count} consecutive free ports")


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def observed(tmp_path_factory):
    """The services with tracing to a local OTLP/HTTP receiver and /metrics on, after two turns."""
    # One COVEL_METRICS_PORT for the group, as an operator sets it for `covel up`: each service gets it plus its place.
    base = _free_run(len(SERVICES))
    metrics_ports = {name: base + place for place, name in enumerate(SERVICES)}
    with OtlpReceiver() as receiver:
        env = {
            "COVEL_PLUGIN_DIRS": f"{REPO_ROOT / 'plugins'}:{PROBE_DIR}",
            "COVEL_LOG_LEVEL": "info",
            "OTEL_TRACES_EXPORTER": "otlp",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": receiver.endpoint,
            "OTEL_BSP_SCHEDULE_DELAY": "100",
            "COVEL_METRICS_PORT": str(base),
            # telemetry-probe's TurnStop fails each turn: the second fault pauses it (covel_hook_plugin_pauses_total).
            "COVEL_HOOKS_FAULT_THRESHOLD": "2",
        }
        group = ServiceGroup(free_port_addrs(), tmp_path_factory.mktemp("observed"), extra_env=env)
        try:
            await group.start()
            async with open_channel(group.addrs["scheduler"]) as channel:
                stub = scheduler_pb2_grpc.SchedulerStub(channel)
                session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(
                    requested_plugins=["telemetry-probe"], approved_plugins=["telemetry-probe"],
                    excluded_plugins=non_story_core_plugin_ids()))).session
                turns = []
                for text in ("I look at the stars.", "I walk to the well."):
                    request = scheduler_pb2.SubmitActionsRequest(session_id=session.id, actions=[resources_pb2.PlayerAction(kind="do", text=text)])
                    turns.extend([event.turn_completed async for event in stub.SubmitActions(request) if event.WhichOneof("event") == "turn_completed"])
                # A caller with a trace of its own: the scheduler's work joins it.
                await stub.GetSession(scheduler_pb2.GetSessionRequest(session_id=session.id),
                                      metadata=(("traceparent", f"00-{CALLER_TRACE_ID}-00f067aa0ba902b7-01"),))
            yield group, receiver, metrics_ports, session, turns
        finally:
            await group.stop()


async def test_one_trace_covers_the_turn_across_the_services(observed):
    group, receiver, _, session, turns = observed
    assert [turn.status for turn in turns] == [store_pb2.TURN_STATUS_COMMITTED] * 2

    def complete(spans) -> bool:
        names = {span.name for span in spans}
        return {"covel.turn", "covel.runtime", "covel.hooks.dispatch", "covel.model.call", "covel.store.commit"} <= names and \
            sum(span.name == "covel.turn" for span in spans) >= 2

    spans = await receiver.wait_for(complete)
    turn_span = next(span for span in spans if span.name == "covel.turn" and span.attributes.get("covel.turn_id") == turns[0].id)
    assert turn_span.service == "covel-scheduler"
    assert turn_span.attributes["covel.session_id"] == session.id
    assert turn_span.attributes["covel.turn.status"] == "committed"
    in_trace = [span for span in spans if span.trace_id == turn_span.trace_id]
    by_id = {span.span_id: span for span in in_trace}

    def under_turn(span) -> bool:
        while span.parent_span_id:
            if span.parent_span_id == turn_span.span_id:
                return True
            if span.parent_span_id not in by_id:
                return False
            span = by_id[span.parent_span_id]
        return False

    named = {(span.service, span.name) for span in in_trace if under_turn(span)}
    assert {
        ("covel-scheduler", "covel.runtime"),
        ("covel-hooks", "covel.hooks.dispatch"),
        ("covel-gateway", "covel.model.call"),
        ("covel-store", "covel.store.commit"),
    } <= named, sorted(named)
    # The gRPC hops in between are spans too, client side in the scheduler and server side in each peer.
    assert ("covel-store", "/covel.store.v1.TransactionalStore/CommitTurn") in named
    runtimes = {span.attributes["covel.runtime_id"]: span.attributes["covel.runtime.status"] for span in in_trace if span.name == "covel.runtime"}
    assert runtimes == {"narrator": "success", "telemetry-probe/crash": "failed"}
    events = {span.attributes["covel.hook.event"] for span in in_trace if span.name == "covel.hooks.dispatch"}
    assert {"TurnStart", "TurnStop"} <= events
    # The second turn is a trace of its own.
    second = next(span for span in spans if span.name == "covel.turn" and span.attributes.get("covel.turn_id") == turns[1].id)
    assert second.trace_id != turn_span.trace_id


async def test_a_caller_s_trace_context_is_continued(observed):
    _, receiver, _, _, _ = observed
    # The services export on their own schedules: wait until both sides' spans have arrived.
    spans = await receiver.wait_for(lambda spans: {"covel-scheduler", "covel-store"}
                                    <= {s.service for s in spans if s.trace_id == CALLER_TRACE_ID})
    joined = {(span.service, span.name) for span in spans if span.trace_id == CALLER_TRACE_ID}
    assert ("covel-scheduler", "/covel.scheduler.v1.Scheduler/GetSession") in joined
    assert ("covel-store", "/covel.store.v1.TransactionalStore/GetSession") in joined


async def test_each_service_exposes_its_metrics(observed):
    _, _, ports, _, turns = observed
    scheduler = scrape(ports["scheduler"])
    assert metric_value(scheduler, "covel_turn_duration_seconds_count", origin="player", status="committed") == 2
    assert metric_value(scheduler, "covel_turn_duration_seconds_sum") > 0
    assert metric_value(scheduler, "grpc_server_handled_total", grpc_method="SubmitActions", grpc_code="OK") == 2
    assert metric_value(scheduler, "grpc_server_handled_total", grpc_method="CreateSession", grpc_code="OK") == 1

    hooks = scrape(ports["hooks"])
    assert metric_value(hooks, "covel_hook_handler_duration_seconds_count", plugin="telemetry-probe", event="TurnStart") == 2
    assert metric_value(hooks, "covel_hook_handler_failures_total", plugin="telemetry-probe", event="TurnStop", status="error") == 2
    assert metric_value(hooks, "covel_hook_handler_failures_total", event="TurnStart") == 0
    assert metric_value(hooks, "covel_hook_plugin_pauses_total", plugin="telemetry-probe") == 1
    # A turn's hook calls go on its one TurnHooks stream: two turns, two streams, their dispatches counted by kind.
    assert metric_value(hooks, "grpc_server_started_total", grpc_method="TurnHooks", grpc_type="bidi_stream") == 2
    assert metric_value(hooks, "covel_stream_calls_total", method="TurnHooks", kind="dispatch") >= 4

    gateway = scrape(ports["gateway"])
    assert metric_value(gateway, "covel_model_call_duration_seconds_count", slot="story", provider="scripted") == 2
    assert metric_value(gateway, "covel_model_tokens_total", slot="story", kind="completion") > 0
    # Each story stream sends at least its text and its final message.
    assert metric_value(gateway, "grpc_server_msg_sent_total", grpc_method="Generate") >= 2 * 2
    assert metric_value(scheduler, "grpc_server_msg_sent_total", grpc_method="SubmitActions") >= 2 * 4

    store = scrape(ports["store"])
    assert metric_value(store, "covel_store_commits_total", status="committed") == 2
    assert metric_value(store, "covel_store_proposals_total", outcome="committed") >= 2
    assert metric_value(store, "grpc_server_handled_total", grpc_method="CommitTurn", grpc_code="OK") == 2
    assert metric_value(store, "grpc_server_handling_seconds_count", grpc_method="AcquireTurnLease") == 2

    registry = scrape(ports["registry"])
    assert metric_value(registry, "grpc_server_handled_total", grpc_service="covel.registry.v1.PluginRegistry", grpc_code="OK") >= 1


async def test_log_lines_of_a_turn_carry_the_session_and_turn_ids(observed):
    group, _, _, session, turns = observed
    lines = [json.loads(line) for line in (group.log_dir / "scheduler.log").read_text().splitlines() if line.startswith("{")]
    failed = [line for line in lines if line.get("event") == "function.failed"]
    # Logged deep in the turn (function_runtime.py) without naming either id: they come bound to the turn's task.
    assert {(line["session_id"], line["turn_id"]) for line in failed} == {(session.id, turn.id) for turn in turns}
    assert all(len(line["trace_id"]) == 32 for line in failed)
    finished = [line for line in lines if line.get("event") == "turn.finished"]
    assert [(line["session_id"], line["turn_id"], line["status"]) for line in finished] == \
        [(session.id, turn.id, "committed") for turn in turns]


def _json_lines(group, service: str) -> list[dict]:
    return [json.loads(line) for line in (group.log_dir / f"{service}.log").read_text().splitlines() if line.startswith("{")]


async def test_the_other_services_log_lines_of_a_turn_carry_its_ids(observed):
    group, _, _, session, turns = observed
    expected = {(session.id, turn.id) for turn in turns}
    # None of these lines names the ids itself: each service binds them from the request it answers.
    for service, event, per_turn in (("hooks", "hook.handler_failed", 1), ("gateway", "gateway.call_finished", 1),
                                     ("store", "turn.recorded", 1)):
        lines = [line for line in _json_lines(group, service) if line.get("event") == event]
        assert len(lines) == per_turn * len(turns), (service, lines)
        assert {(line.get("session_id"), line.get("turn_id")) for line in lines} == expected, (service, lines)
        assert all(line["service"] == service for line in lines)
    failed = next(line for line in _json_lines(group, "hooks") if line.get("event") == "hook.handler_failed")
    assert (failed["hook_event"], failed["plugin_id"], failed["status"]) == ("TurnStop", "telemetry-probe", "error")
    # And every line any of them wrote within a turn's trace carries that turn's ids.
    by_trace = {}
    for line in _json_lines(group, "scheduler"):
        if line.get("event") == "turn.finished":
            by_trace[line["trace_id"]] = (line["session_id"], line["turn_id"])
    assert len(by_trace) == len(turns)
    for service in ("hooks", "gateway", "store"):
        in_turns = [line for line in _json_lines(group, service) if line.get("trace_id") in by_trace]
        assert in_turns, service
        assert all((line.get("session_id"), line.get("turn_id")) == by_trace[line["trace_id"]] for line in in_turns), in_turns


async def test_a_service_on_a_unix_socket_serves_metrics_on_loopback(tmp_path):
    """The side ports of a service whose gRPC address is a unix socket listen on 127.0.0.1 (the
    host part of `unix:/path` is no host: the service used to exit at start)."""
    metrics_port = _free_run(1)
    env = {**os.environ, "COVEL_DATA_DIR": str(tmp_path), "COVEL_GATEWAY_ADDR": f"unix:{tmp_path / 'gateway.sock'}",
           "COVEL_GATEWAY_METRICS_PORT": str(metrics_port)}
    process = await asyncio.create_subprocess_exec(sys.executable, "-m", "services.gateway", cwd=REPO_ROOT, env=env,
                                                   stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    try:
        async with asyncio.timeout(30):
            while b"COVEL_READY" not in (line := await process.stdout.readline()):
                assert line, "the gateway exited before it served"
        assert scrape(metrics_port)  # 200 with samples
    finally:
        process.terminate()
        await process.wait()


async def test_a_taken_metrics_port_turns_off_metrics_not_the_service(tmp_path):
    """COVEL_METRICS_PORT that another process holds: the service serves all the same and its log names the setting."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        env = {**os.environ, "COVEL_DATA_DIR": str(tmp_path), "COVEL_GATEWAY_ADDR": f"unix:{tmp_path / 'gateway.sock'}",
               "COVEL_METRICS_PORT": str(taken)}
        process = await asyncio.create_subprocess_exec(sys.executable, "-m", "services.gateway", cwd=REPO_ROOT, env=env,
                                                       stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        seen = []
        try:
            async with asyncio.timeout(30):
                while b"COVEL_READY" not in (line := await process.stdout.readline()):
                    assert line, f"the gateway exited before it served: {seen}"
                    seen.append(line.decode(errors="replace"))
        finally:
            process.terminate()
            await process.wait()
    [refused] = [json.loads(line) for line in seen if "metrics.port_unavailable" in line]
    assert (refused["port"], refused["setting"]) == (taken, "COVEL_METRICS_PORT") and "COVEL_METRICS_PORT" in refused["fix"]


def test_covel_up_gives_each_service_its_own_metrics_port():
    assert [own_metrics_port({"COVEL_METRICS_PORT": "9100"}, name) for name in SERVICES] == [
        {f"COVEL_{name.upper()}_METRICS_PORT": str(9100 + place)} for place, name in enumerate(SERVICES)]
    assert own_metrics_port({"COVEL_METRICS_PORT": "9100"}, "web") == {"COVEL_WEB_METRICS_PORT": "9105"}
    # A service's own setting wins; no shared port, or not a number: nothing added.
    assert own_metrics_port({"COVEL_METRICS_PORT": "9100", "COVEL_STORE_METRICS_PORT": "9300"}, "store") == {}
    assert own_metrics_port({}, "store") == own_metrics_port({"COVEL_METRICS_PORT": "x"}, "store") == {}

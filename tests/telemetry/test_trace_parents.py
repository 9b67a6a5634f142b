"""Every span of a turn's trace has its parent in the trace (issue 43: the store's TakeTurnSignals span was now and
then an orphan, its client span never exported when the turn's end cancelled the poll in flight). The signal poll
runs every 5 ms here, so most turns end while one is in flight."""

from __future__ import annotations

import pytest

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel_cli.launcher import ServiceGroup, free_port_addrs
from shared.grpc_client import open_channel
from tests.support.builtin_plugins import non_story_core_plugin_ids
from tests.telemetry.otlp_receiver import OtlpReceiver

pytestmark = pytest.mark.asyncio(loop_scope="session")
TURNS = 30


async def test_every_span_of_many_turns_has_its_parent(tmp_path) -> None:
    with OtlpReceiver() as receiver:
        env = {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
               "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": receiver.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "100",
               "COVEL_SCHEDULER_SIGNAL_POLL_MS": "5"}
        group = ServiceGroup(free_port_addrs(), tmp_path / "data", extra_env=env)
        try:
            await group.start()
            async with open_channel(group.addrs["scheduler"]) as channel:
                stub = scheduler_pb2_grpc.SchedulerStub(channel)
                session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(
                    excluded_plugins=non_story_core_plugin_ids()))).session
                turns = []
                for index in range(TURNS):
                    request = scheduler_pb2.SubmitActionsRequest(
                        session_id=session.id, actions=[resources_pb2.PlayerAction(kind="do", text=f"I walk on, {index}.")])
                    turns += [e.turn_completed async for e in stub.SubmitActions(request) if e.WhichOneof("event") == "turn_completed"]
            traces = {turn.trace_id for turn in turns}
            assert len(traces) == TURNS

            def complete(spans) -> bool:
                ours = [span for span in spans if span.trace_id in traces]
                roots = [span for span in ours if span.name == "covel.turn"]
                return len(roots) == TURNS and all(span.parent_span_id in {s.span_id for s in ours} for span in ours if span.parent_span_id)

            # Exporters send in batches: wait until every trace is whole, or report what is missing.
            spans = [span for span in await receiver.wait_for(complete, timeout_s=60) if span.trace_id in traces]
        finally:
            await group.stop()
        # A poll that outlived its turn ends ABORTED (the lease released): nobody's to handle, never logged as an error.
        scheduler_output = "".join(path.read_text() for path in group.log_dir.glob("scheduler.*"))
        assert "never retrieved" not in scheduler_output, scheduler_output[-2000:]
    ids = {span.span_id for span in spans}
    orphans = sorted({(span.service, span.name) for span in spans if span.parent_span_id and span.parent_span_id not in ids})
    assert orphans == [], orphans
    assert any(span.name.endswith("TakeTurnSignals") for span in spans), "the turns polled for signals"

"""effects.parallelSafe through the five services: serial-probe's first and second (parallelSafe: false) each run
alone in their layer, never beside another runtime; third (no declaration) runs beside the others of its layer. Each
handler holds a marker file for half a second and reports the other markers it saw."""

from __future__ import annotations

import pytest

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from shared.grpc_client import open_channel
from shared.structs import from_struct
from tests.e2e.conftest import minimal_session

pytestmark = pytest.mark.asyncio(loop_scope="session")
PROBE = "serial-probe"


async def test_a_runtime_that_is_not_parallel_safe_runs_alone(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(minimal_session(requested_plugins=[PROBE], approved_plugins=[PROBE]))).session
        events = [e async for e in stub.SubmitActions(scheduler_pb2.SubmitActionsRequest(
            session_id=session.id, actions=[resources_pb2.PlayerAction(text="I wait.")]))]
    results = {r.runtime_id: r for r in events[-1].turn_completed.runtime_results if r.runtime_id.startswith(PROBE)}
    assert all(r.status == resources_pb2.RUNTIME_STATUS_SUCCESS for r in results.values()), [r.reason for r in results.values()]
    seen = {runtime_id: from_struct(result.output)["overlapped"] for runtime_id, result in results.items()}
    assert seen[f"{PROBE}/first"] == [] and seen[f"{PROBE}/second"] == [], "a runtime that is not parallel-safe runs alone"
    started = [e.runtime_started.runtime_id for e in events if e.WhichOneof("event") == "runtime_started"]
    assert started.index(f"{PROBE}/third") < started.index(f"{PROBE}/first") < started.index(f"{PROBE}/second"), (
        "the parallel-safe ones of the layer first, then the others one by one in the layer's order")

"""The kernel inputs turn-digest@1 and operations@1, built from what the turn's finished runtimes did."""

from __future__ import annotations

import pytest

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from shared.grpc_client import open_channel
from shared.structs import from_struct

# Only sessions of its own: the session's default group will do (tests/e2e/conftest.py).
SHARED_SERVICES = True

pytestmark = pytest.mark.asyncio(loop_scope="session")
PLUGINS = ["digest-probe", "service-probe"]


async def test_the_reader_gets_the_digest_and_the_staged_operations_of_finished_successful_runtimes(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(
            requested_plugins=PLUGINS, approved_plugins=PLUGINS, locale="en"))).session
        events = [e async for e in stub.SubmitActions(scheduler_pb2.SubmitActionsRequest(
            session_id=session.id, actions=[resources_pb2.PlayerAction(kind="do", text="I look at the gate.")]))]
    turn = events[-1].turn_completed
    results = {r.runtime_id: r for r in turn.runtime_results}
    assert results["digest-probe/stager"].status == resources_pb2.RUNTIME_STATUS_SUCCESS, results["digest-probe/stager"].reason
    assert results["digest-probe/dropper"].status == resources_pb2.RUNTIME_STATUS_FAILED
    reader = results["digest-probe/reader"]
    assert reader.status == resources_pb2.RUNTIME_STATUS_SUCCESS, reader.reason
    output = from_struct(reader.output)
    digest = output["digest"]

    assert digest["turnId"] == turn.id and digest["playerMessage"] == "I look at the gate."
    assert digest["actions"] == [{"seatId": "main", "kind": "act", "text": "I look at the gate.", "source": "player"}]
    submission = digest["lastPlayerInput"]
    assert {k: submission[k] for k in ("sessionId", "turnId", "formId", "values")} == {
        "sessionId": session.id, "turnId": turn.id, "formId": None, "values": {"text": "I look at the gate."}}
    assert submission["id"] and submission["createdAt"]
    assert output["lastPlayerInput"] == submission, "ctx.session.lastPlayerInput is the same snapshot"
    assert digest["narrativeText"] == turn.narrative and turn.narrative
    assert digest["locale"] == "en"
    statuses = {r["runtimeId"]: r["status"] for r in digest["runtimeResults"]}
    assert statuses["digest-probe/stager"] == "success" and statuses["digest-probe/dropper"] == "failed"
    assert "digest-probe/reader" not in statuses, "a runtime still running is not in runtimeResults"

    summaries = digest["toolCallSummaries"]
    assert any("note" in line and "gate" in line for line in summaries), summaries
    assert any("probe.ledger@1" in line for line in summaries), summaries
    assert not any("dropped" in line for line in summaries), "the calls of a failed runtime are left out"

    assert output["operations"] == {"operations": [{
        "contract": "probe.ledger@1", "summary": "probe.ledger@1 staged plugin.data",
        "request": {"entry": "kept"}, "result": {"recorded": "kept"},
    }]}, "only the committable runtime's staged operation, without ids"

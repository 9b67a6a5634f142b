"""Services another plugin registered, as imported agent tools and through ctx.services, and
tool-born proposals, through the real services."""

from __future__ import annotations

import pytest

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from shared.grpc_client import open_channel
from shared.structs import from_struct, from_value, to_struct
from tests.e2e.conftest import minimal_session, running_services

pytestmark = pytest.mark.asyncio(loop_scope="session")
PROVIDER, CLIENT = "service-probe", "service-client-probe"


async def play(services, run: str):
    settings = {PROVIDER: to_struct({"run": run}), CLIENT: to_struct({"run": run})}
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        # Minimal: memory's detached job would draw on the scripted plugin-slot queue the agents use.
        session = (await stub.CreateSession(minimal_session(
            requested_plugins=[PROVIDER, CLIENT], approved_plugins=[PROVIDER, CLIENT], plugin_settings=settings))).session
        events = [e async for e in stub.SubmitActions(scheduler_pb2.SubmitActionsRequest(
            session_id=session.id, actions=[resources_pb2.PlayerAction(text="I ask about the gate.")]))]
    async with services.channel_as("store", "scheduler") as channel:
        entries = (await store_pb2_grpc.TransactionalStoreStub(channel).ListPluginData(
            store_pb2.ListPluginDataRequest(session_id=session.id, plugin_id=PROVIDER))).entries
    turn = events[-1].turn_completed
    data = {(e.namespace, e.key): from_value(e.value) for e in entries}
    return {r.runtime_id: r for r in turn.runtime_results}, data


async def test_a_function_calls_read_and_write_services(services) -> None:
    results, data = await play(services, "caller")
    caller = results[f"{CLIENT}/caller"]
    assert caller.status == resources_pb2.RUNTIME_STATUS_SUCCESS, caller.reason
    output = from_struct(caller.output)
    assert output["found"] == {"ok": True, "data": {"place": "gate", "known": True}}
    assert output["recorded"]["ok"] is True
    assert (output["bad"], output["missing"]) == ("invalid-input", "not-found")
    # The write service's change belongs to its own plugin and committed with the caller.
    # It reaches PreStateCommit from the provider as `service:<contract>`, the caller unnamed (issue 40, 7).
    assert data == {("ledger", "from-code"): {"by": f"{CLIENT}/caller", "committedAs": f"{PROVIDER} service:probe.ledger@1"}}


async def test_an_agent_imports_services_as_tools_and_a_plugin_tool_proposes(tmp_path) -> None:
    script = {"queues": {"plugin": [
        {"tool_calls": [{"name": "probe-lookup", "arguments": {"q": "gate"}}]},
        {"tool_calls": [{"name": "write-ledger", "arguments": {"entry": "from-agent"}}]},
        {"text": "The gate is known and recorded."},
        {"tool_calls": [{"name": "stamp", "arguments": {}}]},
        {"text": "Stamped."},
    ]}}
    async with running_services(tmp_path, script=script) as group:
        results, data = await play(group, "asker")
        assert results[f"{CLIENT}/asker"].status == resources_pb2.RUNTIME_STATUS_SUCCESS, results[f"{CLIENT}/asker"].reason
        assert data == {("ledger", "from-agent"): {"by": f"{CLIENT}/asker", "committedAs": f"{PROVIDER} service:probe.ledger@1"}}
        results, data = await play(group, "stamper")
        assert results[f"{PROVIDER}/stamper"].status == resources_pb2.RUNTIME_STATUS_SUCCESS, results[f"{PROVIDER}/stamper"].reason
        assert data == {("stamps", "count"): {"n": 1}}

"""Subagents and generated dataset tools through the real services on the scripted model."""

from __future__ import annotations

import pytest

from covel.common.v1 import common_pb2
from covel.scheduler.v1 import scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from shared.grpc_client import open_channel
from shared.structs import from_struct, from_value, to_struct
from tests.e2e.conftest import running_services

pytestmark = pytest.mark.asyncio(loop_scope="session")
PROBE = "subagent-probe"
KEEPER_SCRIPT = {"queues": {"plugin": [
    {"tool_calls": [{"name": "notes-upsert", "arguments": {"value": {"id": "turn-1", "text": ""}}}]},
    {"tool_calls": [{"name": "notes-upsert", "arguments": {"value": {"id": "turn-1", "text": "The gate stayed shut."}}}]},
    {"text": "Noted."},
]}}


async def play(services, run: str):
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(
            requested_plugins=[PROBE], approved_plugins=[PROBE], plugin_settings={PROBE: to_struct({"run": run})}))).session
        events = [event async for event in stub.SubmitActions(scheduler_pb2.SubmitActionsRequest(
            session_id=session.id, actions=[common_pb2.PlayerAction(text="I knock at the gate.")]))]
    turn = events[-1].turn_completed
    return session, {r.runtime_id: r for r in turn.runtime_results}, turn


async def test_a_function_runs_subagents_by_contract_and_by_runtime_id(services) -> None:
    _, results, turn = await play(services, "ask")
    ask = results[f"{PROBE}/ask"]
    assert ask.status == "success", ask.reason
    output = from_struct(ask.output)
    for key in ("byContract", "byId"):
        assert output[key]["ok"] is True and output[key]["output"]["verdict"] in ("pass", "stop"), output[key]
        assert output[key]["stopReason"] == "completed"
    assert (output["tooLong"], output["missing"]) == ("invalid-input", "not-found")
    # A subagent is no top-level runtime: no result, no PreRuntime/PostRuntime of its own.
    assert f"{PROBE}/verdict" not in results
    # Its trace is the caller's: started / completed per call, tied to the call and the caller.
    marks = [(e.event, e.status) for e in turn.hook_trace if e.event.startswith("subagent.")]
    assert marks == [("subagent.started", "ok"), ("subagent.completed", "ok")] * 2
    calls = {e.subagent_call_id for e in turn.hook_trace if e.event.startswith("subagent.")}
    assert len(calls) == 2 and all(e.parent_runtime_id == f"{PROBE}/ask" for e in turn.hook_trace if e.subagent_call_id)


async def test_an_agent_writes_its_dataset_through_the_generated_tools(tmp_path) -> None:
    async with running_services(tmp_path, script=KEEPER_SCRIPT) as services:
        session, results, turn = await play(services, "keeper")
        keeper = results[f"{PROBE}/keeper"]
        assert keeper.status == "success", keeper.reason
        async with open_channel(services.addrs["store"]) as channel:
            entries = (await store_pb2_grpc.TransactionalStoreStub(channel).ListPluginData(
                store_pb2.ListPluginDataRequest(session_id=session.id, plugin_id=PROBE, namespace="notes"))).entries
    # The first call broke the schema (empty text) and was refused before any write; the second committed.
    assert {entry.key: from_value(entry.value) for entry in entries} == {"turn-1": {"id": "turn-1", "text": "The gate stayed shut."}}


async def test_a_nested_agent_run_writes_with_its_parent(tmp_path) -> None:
    async with running_services(tmp_path, script=KEEPER_SCRIPT) as services:
        session, results, _ = await play(services, "nest")
        nester = results[f"{PROBE}/nester"]
        assert nester.status == "success", nester.reason
        output = from_struct(nester.output)
        assert output["nested"] == "success" and output["output"] == {"content": "Noted."}
        assert "ctx.agents.run" in output["refused"]
        async with open_channel(services.addrs["store"]) as channel:
            entries = (await store_pb2_grpc.TransactionalStoreStub(channel).ListPluginData(
                store_pb2.ListPluginDataRequest(session_id=session.id, plugin_id=PROBE, namespace="notes"))).entries
    assert [entry.key for entry in entries] == ["turn-1"]

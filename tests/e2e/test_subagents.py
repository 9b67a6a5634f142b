"""Subagents and generated dataset tools through the real services on the scripted model."""

from __future__ import annotations

import json

import pytest

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from shared.grpc_client import open_channel
from shared.structs import from_struct, from_value, to_struct
from tests.e2e.conftest import minimal_session, running_services

# Only sessions of its own: the session's default group will do (tests/e2e/conftest.py).
SHARED_SERVICES = True

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
        session = (await stub.CreateSession(minimal_session(
            requested_plugins=[PROBE], approved_plugins=[PROBE], plugin_settings={PROBE: to_struct({"run": run})}))).session
        events = [event async for event in stub.SubmitActions(scheduler_pb2.SubmitActionsRequest(
            session_id=session.id, actions=[resources_pb2.PlayerAction(text="I knock at the gate.")]))]
    turn = events[-1].turn_completed
    return session, {r.runtime_id: r for r in turn.runtime_results}, turn


async def test_a_function_runs_subagents_by_contract_and_by_runtime_id(services) -> None:
    _, results, turn = await play(services, "ask")
    ask = results[f"{PROBE}/ask"]
    assert ask.status == resources_pb2.RUNTIME_STATUS_SUCCESS, ask.reason
    output = from_struct(ask.output)
    for key in ("byContract", "byId"):
        assert output[key]["ok"] is True and output[key]["output"]["verdict"] in ("pass", "stop"), output[key]
        assert output[key]["stopReason"] == "completed"
    assert (output["tooLong"], output["missing"]) == ("invalid-input", "not-found")
    # A subagent is no top-level runtime: no result, no PreRuntime/PostRuntime of its own.
    assert f"{PROBE}/verdict" not in results
    # Its trace is the caller's: started / completed per call, tied to the call and the caller.
    marks = [(e.event, e.status) for e in turn.hook_trace if e.event.startswith("subagent.")]
    assert marks == [("subagent.started", resources_pb2.HOOK_STATUS_OK), ("subagent.completed", resources_pb2.HOOK_STATUS_OK)] * 2
    calls = {e.subagent_call_id for e in turn.hook_trace if e.event.startswith("subagent.")}
    assert len(calls) == 2 and all(e.parent_runtime_id == f"{PROBE}/ask" for e in turn.hook_trace if e.subagent_call_id)


async def test_an_agent_writes_its_dataset_through_the_generated_tools(tmp_path) -> None:
    async with running_services(tmp_path, script=KEEPER_SCRIPT) as services:
        session, results, turn = await play(services, "keeper")
        keeper = results[f"{PROBE}/keeper"]
        assert keeper.status == resources_pb2.RUNTIME_STATUS_SUCCESS, keeper.reason
        async with services.channel_as("store", "scheduler") as channel:
            entries = (await store_pb2_grpc.TransactionalStoreStub(channel).ListPluginData(
                store_pb2.ListPluginDataRequest(session_id=session.id, plugin_id=PROBE, namespace="notes"))).entries
    # The first call broke the schema (empty text) and was refused before any write; the second committed.
    assert {entry.key: from_value(entry.value) for entry in entries} == {"turn-1": {"id": "turn-1", "text": "The gate stayed shut."}}


async def test_a_nested_agent_run_writes_with_its_parent(tmp_path) -> None:
    async with running_services(tmp_path, script=KEEPER_SCRIPT) as services:
        session, results, _ = await play(services, "nest")
        nester = results[f"{PROBE}/nester"]
        assert nester.status == resources_pb2.RUNTIME_STATUS_SUCCESS, nester.reason
        output = from_struct(nester.output)
        assert output["nested"] == "success" and output["output"] == {"content": "Noted."}
        assert "ctx.agents.run" in output["refused"]
        async with services.channel_as("store", "scheduler") as channel:
            entries = (await store_pb2_grpc.TransactionalStoreStub(channel).ListPluginData(
                store_pb2.ListPluginDataRequest(session_id=session.id, plugin_id=PROBE, namespace="notes"))).entries
    assert [entry.key for entry in entries] == ["turn-1"]


EXECUTION_SCRIPT = {"rules": [
    # Both answers wait, so the three subagents' PreLLMCall hooks all run before any PostLLMResponse.
    {"match": "[A]", "reply": {"text": "A, as the model wrote it.", "delay_ms": 400}},
    {"match": "[B]", "reply": {"text": "B, as the model wrote it.", "delay_ms": 400}},
    {"match": "[F]", "reply": {"error": {"status": 400, "message": "bad request"}, "delay_ms": 200}},
]}


async def test_concurrent_subagents_of_one_runtime_are_told_apart_by_the_hook_context(tmp_path) -> None:
    """execution-probe/fan runs three helper subagents at once; its hookspec policy answers [A] itself while its
    plain PreLLMCall handler rewrites every call's messages. Each PostLLMResponse finds its own call by the
    context's execution id, and the [F] call that failed reaches after_llm_call at fan's PostRuntime."""
    async with running_services(tmp_path, script=EXECUTION_SCRIPT) as services:
        async with open_channel(services.addrs["scheduler"]) as channel:
            stub = scheduler_pb2_grpc.SchedulerStub(channel)
            session = (await stub.CreateSession(minimal_session(
                requested_plugins=["execution-probe"], approved_plugins=["execution-probe"]))).session
            events = [event async for event in stub.SubmitActions(scheduler_pb2.SubmitActionsRequest(
                session_id=session.id, actions=[resources_pb2.PlayerAction(text="Three strangers at the gate.")]))]
        turn = events[-1].turn_completed
        fan = {r.runtime_id: r for r in turn.runtime_results}["execution-probe/fan"]
        path = tmp_path / "execution-probe.jsonl"
        heard = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    assert fan.status == resources_pb2.RUNTIME_STATUS_SUCCESS, fan.reason
    output = from_struct(fan.output)
    assert output["[A]"]["ok"] and output["[A]"]["output"] == {"content": "A, answered by the hook."}
    assert output["[B]"]["ok"] and output["[B]"]["output"] == {"content": "B, as the model wrote it."}
    assert output["[F]"]["ok"] is False
    heard = [r for r in heard if r["session_id"] == session.id]
    before = {r["brief"]: r for r in heard if r["hook"] == "before_llm_call"}
    assert set(before) == {"[A]", "[B]", "[F]"}
    # Every subagent run is an execution of its own, named by its call id and its caller.
    assert len({r["execution_id"] for r in before.values()}) == 3
    assert all(r["execution_id"] == r["subagent_call_id"] and r["parent_runtime_id"] == "execution-probe/fan"
               for r in before.values())
    calls = {e.subagent_call_id for e in turn.hook_trace if e.event == "subagent.started"}
    assert calls == {r["execution_id"] for r in before.values()}, "the ids the trace records"
    after = {r["brief"]: r for r in heard if r["hook"] == "after_llm_call"}
    assert after["[A]"]["text"] == "A, answered by the hook." and after["[A]"]["execution_id"] == before["[A]"]["execution_id"]
    assert after["[B]"]["text"] == "B, as the model wrote it." and after["[B]"]["execution_id"] == before["[B]"]["execution_id"]
    # The failed call: heard when the run it belongs to ended (fan's PostRuntime), naming the subagent call.
    assert after["[F]"]["text"] is None and before["[F]"]["execution_id"] in after["[F]"]["error"]
    assert after["[F]"]["runtime_id"] == "execution-probe/fan" and after["[F]"]["execution_id"] == fan.run_id

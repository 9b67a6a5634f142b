"""The agent tool loop and its hooks, with a real plugin's tools run by the hooks service."""

from __future__ import annotations

import json

import pytest

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from shared.grpc_client import open_channel
from shared.structs import from_struct, to_struct

# Only sessions of its own: the session's default group will do (tests/e2e/conftest.py).
SHARED_SERVICES = True

pytestmark = pytest.mark.asyncio(loop_scope="session")
PROBE = "tool-probe"
FINISHER, LOOPER = "tool-probe/finisher", "tool-probe/looper"


async def play(services, settings: dict):
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(
            requested_plugins=[PROBE], approved_plugins=[PROBE], plugin_settings={PROBE: to_struct(settings)}))).session
        request = scheduler_pb2.SubmitActionsRequest(session_id=session.id, actions=[resources_pb2.PlayerAction(text="I read the sign.")])
        events = [event async for event in stub.SubmitActions(request)]
    turn = events[-1].turn_completed
    return {r.runtime_id: r for r in turn.runtime_results}, turn


def entries(turn, event: str):
    return [entry for entry in turn.hook_trace if entry.event == event]


async def test_finish_with_ends_on_the_tool_and_its_data_is_the_output(services) -> None:
    results, _ = await play(services, {})
    finisher = results[FINISHER]
    assert finisher.status == resources_pb2.RUNTIME_STATUS_SUCCESS
    output = from_struct(finisher.output)
    assert output["by"] == FINISHER and output["saved"]
    looper = results[LOOPER]
    # Three tool steps used up maxSteps; the finalizer asked once more without tools for the answer.
    assert looper.status == resources_pb2.RUNTIME_STATUS_SUCCESS and "content" in from_struct(looper.output)


async def test_post_tool_use_terminate_ends_the_loop(services) -> None:
    results, turn = await play(services, {"runtime": LOOPER, "terminate": True})
    assert results[LOOPER].status == resources_pb2.RUNTIME_STATUS_SUCCESS
    assert len([e for e in entries(turn, "PreStep") if True]) >= 1


async def test_pre_tool_use_abort_refuses_the_call(services) -> None:
    results, turn = await play(services, {"runtime": FINISHER, "veto": True, "report": True})
    assert results[FINISHER].status == resources_pb2.RUNTIME_STATUS_FAILED and results[FINISHER].reason.startswith("max-steps"), results[FINISHER].reason
    aborts = [e for e in entries(turn, "PreToolUse") if e.status == resources_pb2.HOOK_STATUS_ABORT]
    assert len(aborts) == 8 and aborts[0].message == "tool-probe refuses this call"
    assert [e for e in entries(turn, "PostToolUse") if e.handler_plugin_id == PROBE and e.status == resources_pb2.HOOK_STATUS_ABORT] == [], \
        "a refused call never ran, so PostToolUse does not fire"
    # The loop records each refused call as skipped: tool.calling / tool.failed with skipReason hook-aborted.
    skipped = [(e.event, e.status, json.loads(e.message)["skipReason"]) for e in turn.hook_trace
               if e.event in ("tool.calling", "tool.failed") and e.runtime_id == FINISHER]
    assert skipped == [("tool.calling", resources_pb2.HOOK_STATUS_SKIPPED, "hook-aborted"), ("tool.failed", resources_pb2.HOOK_STATUS_SKIPPED, "hook-aborted")] * 8


async def test_pre_tool_use_rename_keeps_the_id_and_an_unlisted_tool_is_unauthorized(services) -> None:
    results, turn = await play(services, {"runtime": LOOPER, "rename": "delete-everything", "report": True})
    reports = [json.loads(e.message) for e in entries(turn, "PostToolUse") if e.status == resources_pb2.HOOK_STATUS_ABORT]
    assert reports and all(r["id"] != "changed" for r in reports)
    assert reports[0]["result"]["ok"] is False and reports[0]["result"]["error"]["code"] == "unauthorized"


async def test_pre_step_narrows_tools_and_lowers_steps(services) -> None:
    results, turn = await play(services, {"runtime": LOOPER, "narrow": "save-note", "steps": 2, "report": True})
    assert results[LOOPER].status == resources_pb2.RUNTIME_STATUS_SUCCESS, "two tool steps, then the finalizer's answer"
    looper_steps = [e for e in entries(turn, "PreStep")]
    reports = [json.loads(e.message) for e in entries(turn, "PostToolUse") if e.status == resources_pb2.HOOK_STATUS_ABORT]
    assert len(reports) == 2, "stepsRemaining 2 allowed two steps"
    assert all("saved" in r["result"]["data"] for r in reports), "the narrowed step offered only save-note"
    assert len(looper_steps) >= 2
    # What the hook asked for that a step cannot honour is recorded in that step's step.completed.
    ignored = [json.loads(e.message)["ignored"] for e in entries(turn, "step.completed") if e.runtime_id == LOOPER]
    assert ignored and all("tools: not-a-tool" in step for step in ignored)


async def test_pre_step_stop_cancelled_fails_and_tool_finished_still_checks_completion(services) -> None:
    results, _ = await play(services, {"runtime": FINISHER, "stop": "cancelled"})
    assert results[FINISHER].reason == 'Runtime "tool-probe/finisher" was stopped by a PreStep hook: enough'
    results, _ = await play(services, {"runtime": FINISHER, "stop": "tool-finished"})
    assert results[FINISHER].status == resources_pb2.RUNTIME_STATUS_FAILED and results[FINISHER].reason.startswith("completion:")

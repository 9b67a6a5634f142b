"""The context-overflow finalizer through the real services (issue 40): the gateway knows a model's context
window (the operator's `context_window`) and answers a request that exceeds it with finish reason
context_overflow, asking no model; the agent loop then drops its oldest tool steps as far as the window needs and
asks once more, tools off, for the final answer; with `finalizer: false` the run fails, saying why."""

from __future__ import annotations

import json

import pytest
import pytest_asyncio
import yaml

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from shared.grpc_client import open_channel
from shared.structs import from_struct, to_struct
from tests.e2e.conftest import minimal_session, restart_gateway, running_services

pytestmark = pytest.mark.asyncio(loop_scope="session")
PROBE = "overflow-probe"
WINDOW = 1500
# read-archive answers `size` characters: ASCII counts a token per 4 characters (shared/model_context.py).
PART_SIZE = 2800


def read(part: str, size: int = PART_SIZE) -> dict:
    return {"tool_calls": [{"name": "read-archive", "arguments": {"part": part, "size": size}}]}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def overflow_services(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("overflow")
    config = data_dir / "gateway.yaml"
    # The reader's slot goes to a scripted provider with a small window; every other slot to the plain one.
    config.write_text(
        yaml.safe_dump(
            {
                "providers": {"small": {"kind": "scripted", "context_window": WINDOW}},
                "slots": {"default": "scripted", "reader": "small:scripted"},
            }
        )
    )
    async with running_services(data_dir, script={}, extra_env={"COVEL_GATEWAY_CONFIG": str(config)}) as group:
        yield group


async def play(services, run: str, text: str = "What does the archive say?"):
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (
            await stub.CreateSession(
                minimal_session(
                    requested_plugins=[PROBE], approved_plugins=[PROBE], plugin_settings={PROBE: to_struct({"run": run})}
                )
            )
        ).session
        events = [
            event
            async for event in stub.SubmitActions(
                scheduler_pb2.SubmitActionsRequest(session_id=session.id, actions=[resources_pb2.PlayerAction(text=text)])
            )
        ]
        turn_id = events[-1].turn_completed.id
        return (await stub.GetTurn(scheduler_pb2.GetTurnRequest(session_id=session.id, turn_id=turn_id))).turn


def requests(turn, runtime_id: str) -> list[dict]:
    return [
        json.loads(e.message)
        for e in turn.hook_trace
        if e.event == "PreLLMCall" and e.handler_plugin_id == PROBE and e.runtime_id == runtime_id and e.message
    ]


def overflow_entries(turn, runtime_id: str) -> list[tuple[int, dict]]:
    return [
        (e.status, json.loads(e.message))
        for e in turn.hook_trace
        if e.event == "agent.context_overflow" and e.runtime_id == runtime_id
    ]


def result_of(turn, runtime_id: str):
    return next(r for r in turn.runtime_results if r.runtime_id == runtime_id)


async def test_an_overflowing_request_drops_the_oldest_tool_step_and_asks_for_the_answer_without_tools(overflow_services) -> None:
    answer = "The archive tells of alpha and beta."
    # Two parts of ~700 tokens each: the third request (both results) exceeds the window of 1500.
    await restart_gateway(overflow_services, {"queues": {"reader": [read("alpha"), read("beta"), {"text": answer}]}})
    turn = await play(overflow_services, "reader")
    result = result_of(turn, f"{PROBE}/reader")
    assert result.status == resources_pb2.RUNTIME_STATUS_SUCCESS, result.reason
    # The overflowing request asked no model: the third scripted reply answered the finalizer.
    assert from_struct(result.output) == {"content": answer}
    [(status, entry)] = overflow_entries(turn, f"{PROBE}/reader")
    assert status == resources_pb2.HOOK_STATUS_OK
    assert entry["contextWindow"] == WINDOW and entry["promptTokens"] > WINDOW and entry["finalizer"] is True
    assert (entry["droppedToolSteps"], entry["droppedTools"]) == (1, ["read-archive"])
    assert entry["trimmedTokens"] <= WINDOW - WINDOW // 8
    first, second, overflowed, final = requests(turn, f"{PROBE}/reader")
    assert first["tools"] == second["tools"] == overflowed["tools"] == ["read-archive"]
    assert (second["toolParts"], overflowed["toolParts"]) == (["alpha"], ["alpha", "beta"])
    # The finalizer: tools off, the oldest step gone, the last one kept, and the model told what was left out.
    assert final["tools"] == [] and final["toolParts"] == ["beta"]
    assert final["lastUser"].startswith(
        "The conversation no longer fits the model's context: 1 earlier tool step(s) (read-archive)"
    )


async def test_with_the_finalizer_off_an_overflowing_request_fails_the_run_saying_why(overflow_services) -> None:
    await restart_gateway(overflow_services, {"queues": {"reader": [read("alpha"), read("beta"), {"text": "never read"}]}})
    turn = await play(overflow_services, "strict-reader")
    result = result_of(turn, f"{PROBE}/strict-reader")
    assert result.status == resources_pb2.RUNTIME_STATUS_FAILED
    assert (
        result.reason.startswith("context-overflow: the request (about ")
        and "no finalizer: agent.loop.finalizer is off" in result.reason
    )
    [(status, entry)] = overflow_entries(turn, f"{PROBE}/strict-reader")
    assert status == resources_pb2.HOOK_STATUS_ERROR and entry["finalizer"] is False and entry["contextWindow"] == WINDOW


async def test_a_first_request_too_large_fails_for_want_of_a_tool_step_to_leave_out(overflow_services) -> None:
    await restart_gateway(overflow_services, {"queues": {"reader": [{"text": "never read"}]}})
    turn = await play(overflow_services, "reader", text="Read this: " + "words " * 1200)
    result = result_of(turn, f"{PROBE}/reader")
    assert result.status == resources_pb2.RUNTIME_STATUS_FAILED
    assert "no finalizer: the run has no complete tool step to leave out" in result.reason
    # The story's slot has no window: the narrator told the turn all the same.
    assert result_of(turn, "narrator").status == resources_pb2.RUNTIME_STATUS_SUCCESS

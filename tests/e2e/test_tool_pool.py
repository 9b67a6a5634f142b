"""A batch of read-only calls runs as one concurrent pool; a non-read-only call is a barrier."""

from __future__ import annotations

import json

import pytest
import pytest_asyncio

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2
from shared.grpc_client import open_channel
from shared.structs import to_struct
from tests.e2e.conftest import running_services

pytestmark = pytest.mark.asyncio(loop_scope="session")
SLOW = {"name": "lookup", "arguments": {"word": "slow"}}
CONTINUING = {"segments": [{"kind": "narration", "text": "The road unrolls ahead."}], "yield": "continue"}
BATCH = [SLOW, SLOW, SLOW, {"name": "save-note", "arguments": {"note": "after the pool"}}, SLOW]


SCRIPT = {"rules": [
    {"match": "pool test", "slots": ["plugin"], "reply": {"tool_calls": BATCH}},
    {"match": "loop test", "slots": ["plugin"], "reply": {"tool_calls": [{"name": "lookup", "arguments": {"word": "same"}}]}},
    {"match": "emit test", "slots": ["plugin"], "reply": {"tool_calls": [
        {"name": "emit-event", "arguments": {"topic": "probe.rang", "payload": {"n": 7}}}, {"name": "runtime-done", "arguments": {}}]}},
    {"match": "repair test", "slots": ["story"], "reply": {"text": "Just prose, no JSON."}},
    {"match": "keep going", "slots": ["story"], "reply": {"json": CONTINUING}},
    {"match": "The player waits", "slots": ["story"], "reply": {"json": CONTINUING}},
    # A model that ignores the perturbation and repeats itself anyway.
    {"match": "same tool call several times", "slots": ["plugin"],
     "reply": {"tool_calls": [{"name": "lookup", "arguments": {"word": "same"}}]}},
]}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def scripted_services(tmp_path_factory):
    async with running_services(tmp_path_factory.mktemp("pool"), script=SCRIPT) as group:
        yield group


async def test_pool_then_barrier(scripted_services) -> None:
    async with open_channel(scripted_services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(
            requested_plugins=["tool-probe"], approved_plugins=["tool-probe"],
            plugin_settings={"tool-probe": to_struct({"runtime": "tool-probe/finisher", "report": True})}))).session
        request = scheduler_pb2.SubmitActionsRequest(session_id=session.id, actions=[resources_pb2.PlayerAction(text="pool test")])
        events = [event async for event in stub.SubmitActions(request)]
        turn = events[-1].turn_completed
    finisher = next(r for r in turn.runtime_results if r.runtime_id == "tool-probe/finisher")
    assert finisher.status == resources_pb2.RUNTIME_STATUS_SUCCESS, finisher.reason
    mine = [e for e in turn.hook_trace if e.event in ("PreToolUse", "PostToolUse") and e.runtime_id == "tool-probe/finisher"]
    # The pool's hooks: three PreToolUse, then three PostToolUse; then save-note alone (a barrier); then the last lookup.
    assert [e.event for e in mine] == ["PreToolUse"] * 3 + ["PostToolUse"] * 3 + ["PreToolUse", "PostToolUse"] * 2
    pooled = [json.loads(e.message)["result"]["data"] for e in mine[3:6]]
    assert max(p["started"] for p in pooled) < min(p["ended"] for p in pooled), "the three lookups overlapped in time"
    barrier_after = json.loads(mine[9].message)["result"]["data"]
    assert barrier_after["started"] >= max(p["ended"] for p in pooled)


async def test_a_repeated_call_is_perturbed_then_fails_or_falls_back(scripted_services) -> None:
    async with open_channel(scripted_services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(
            requested_plugins=["tool-probe"], approved_plugins=["tool-probe"]))).session
        request = scheduler_pb2.SubmitActionsRequest(session_id=session.id, actions=[resources_pb2.PlayerAction(text="loop test")])
        turn = [event async for event in stub.SubmitActions(request)][-1].turn_completed
    results = {r.runtime_id: r for r in turn.runtime_results}
    # The system profile: 3 repeats, one perturbation, 3 more repeats, then loop-detected.
    assert results["tool-probe/finisher"].status == resources_pb2.RUNTIME_STATUS_FAILED
    assert results["tool-probe/finisher"].reason == "loop-detected: the same tool call was repeated 3 times"
    assert results["tool-probe/looper"].status == resources_pb2.RUNTIME_STATUS_SUCCESS


async def test_a_story_that_yields_continue_advances_up_to_the_session_bound(scripted_services) -> None:
    async with open_channel(scripted_services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(
            plugin_settings={"framework": to_struct({"maxAutoAdvance": 2})}))).session
        request = scheduler_pb2.SubmitActionsRequest(session_id=session.id, actions=[resources_pb2.PlayerAction(text="I keep going.")])
        events = [event async for event in stub.SubmitActions(request)]
        turns = [e.turn_completed for e in events if e.WhichOneof("event") == "turn_completed"]
        assert [t.origin for t in turns] == [resources_pb2.TURN_ORIGIN_PLAYER, resources_pb2.TURN_ORIGIN_CONTINUATION, resources_pb2.TURN_ORIGIN_CONTINUATION]
        assert [t.logical_turn for t in turns] == [1, 1, 1], "an advance shares the logical turn of the input"
        assert turns[1].actions[0].kind == "advance" and turns[1].actions[0].source == resources_pb2.ACTION_SOURCE_SYSTEM
        messages = (await stub.ListMessages(scheduler_pb2.ListMessagesRequest(session_id=session.id))).messages
        assert [m.role for m in messages] == [resources_pb2.MESSAGE_ROLE_PLAYER, resources_pb2.MESSAGE_ROLE_STORY, resources_pb2.MESSAGE_ROLE_STORY, resources_pb2.MESSAGE_ROLE_STORY]
        player_again = [e async for e in stub.SubmitActions(scheduler_pb2.SubmitActionsRequest(
            session_id=session.id, actions=[resources_pb2.PlayerAction(text="I stop.")]))][-1].turn_completed
        assert player_again.logical_turn == 2


async def test_builtin_emit_event_and_runtime_done(scripted_services) -> None:
    async with open_channel(scripted_services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(requested_plugins=["event-probe"], approved_plugins=["event-probe"]))).session
        request = scheduler_pb2.SubmitActionsRequest(session_id=session.id, actions=[resources_pb2.PlayerAction(text="emit test")])
        turn = [event async for event in stub.SubmitActions(request)][-1].turn_completed
    results = {r.runtime_id: r for r in turn.runtime_results}
    assert results["event-probe/announcer"].status == resources_pb2.RUNTIME_STATUS_SUCCESS, results["event-probe/announcer"].reason
    assert [e.name for e in turn.events].count("probe.rang") == 2, "the function's and the agent's"
    assert results["event-probe/follower"].status == resources_pb2.RUNTIME_STATUS_SUCCESS


async def test_an_invalid_story_gets_one_repair_request(scripted_services) -> None:
    async with open_channel(scripted_services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest())).session
        request = scheduler_pb2.SubmitActionsRequest(session_id=session.id, actions=[resources_pb2.PlayerAction(text="repair test")])
        events = [event async for event in stub.SubmitActions(request)]
    turn = events[-1].turn_completed
    resets = [e for e in events if e.WhichOneof("event") == "narrative_delta" and e.narrative_delta.reset]
    assert len(resets) == 1, "the invalid draft is withdrawn once"
    assert turn.status == store_pb2.TURN_STATUS_COMMITTED and "Just prose" not in turn.narrative

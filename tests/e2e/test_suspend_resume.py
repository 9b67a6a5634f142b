"""Suspend and resume through the five services: an agent asks the player with the suspend tool and stops
(suspended, its question an open interaction); the answer, sent with SubmitInteraction, resumes it in a turn of
origin resume, from what its turn saved in the store: a scheduler restarted in between does not matter."""

from __future__ import annotations

import asyncio
import json
import signal
import time

import grpc
import pytest
import pytest_asyncio

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from covel_cli.launcher import check_health
from shared.grpc_client import open_channel
from shared.structs import from_struct, from_value, to_struct
from tests.e2e.conftest import minimal_session, restart_gateway, running_services

PROBE = "suspend-probe"
ASKER = f"{PROBE}/asker"
DOORS = {"kind": "choice", "id": "which-door", "prompt": "Which door?", "options": [{"id": "l", "label": "Left"}, {"id": "r", "label": "Right"}]}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def asking(tmp_path_factory):
    async with running_services(tmp_path_factory.mktemp("suspend"), script={}) as group:
        yield group


async def submit(stub, session_id: str, text: str) -> list:
    request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[resources_pb2.PlayerAction(text=text)])
    return [event async for event in stub.SubmitActions(request)]


async def restart_scheduler(group) -> None:
    """SIGHUP: the scheduler restarts in place; what it held in memory is gone."""
    group.processes["scheduler"].send_signal(signal.SIGHUP)
    await asyncio.sleep(0.5)
    deadline = time.monotonic() + 30
    while await check_health(group.addrs["scheduler"], timeout_s=0.5, security=group.security("scheduler")) != "SERVING":
        assert time.monotonic() < deadline, "the scheduler did not come back"
        await asyncio.sleep(0.1)


@pytest.mark.asyncio(loop_scope="session")
async def test_an_agent_suspends_on_a_question_and_the_answer_resumes_it_after_a_restart(asking) -> None:
    await restart_gateway(asking, {"queues": {"asker": [
        {"tool_calls": [{"name": "suspend", "arguments": {"interaction": DOORS}}]},
        {"text": json.dumps({"door": "left"})},
    ]}})
    async with open_channel(asking.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(minimal_session(requested_plugins=[PROBE], approved_plugins=[PROBE]))).session
        events = await submit(stub, session.id, "I stand before two doors.")
        turn = events[-1].turn_completed
        ran = {r.runtime_id: r for r in turn.runtime_results}
        assert turn.status == store_pb2.TURN_STATUS_COMMITTED and ran["narrator"].status == resources_pb2.RUNTIME_STATUS_SUCCESS
        assert ran[ASKER].status == resources_pb2.RUNTIME_STATUS_SUSPENDED, "the saved run is the kernel's (no field of the public record holds it)"
        [asked] = [e.interaction for e in events if e.WhichOneof("event") == "interaction"]
        assert (asked.id, asked.kind, asked.resumes, asked.runtime_id) == ("which-door", resources_pb2.INTERACTION_KIND_CHOICE, True, ASKER)

        with pytest.raises(grpc.aio.AioRpcError) as refused:
            [e async for e in stub.SubmitActions(scheduler_pb2.SubmitActionsRequest(session_id=session.id, actions=[resources_pb2.PlayerAction(
                kind="say", text="Left", interaction=resources_pb2.InteractionAnswer(id="which-door", values=to_struct({"option": "l"})))]))]
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "send it with SubmitInteraction" in refused.value.details()

    await restart_scheduler(asking)
    async with open_channel(asking.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as bad:
            [e async for e in stub.SubmitInteraction(scheduler_pb2.SubmitInteractionRequest(
                session_id=session.id, interaction_id="which-door", values=to_struct({"option": "up"})))]
        assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "values.option: must be one of l, r" in bad.value.details()
        events = [e async for e in stub.SubmitInteraction(scheduler_pb2.SubmitInteractionRequest(
            session_id=session.id, interaction_id="which-door", values=to_struct({"option": "l"})))]
        resumed = events[-1].turn_completed
        assert resumed.status == store_pb2.TURN_STATUS_COMMITTED and resumed.origin == resources_pb2.TURN_ORIGIN_RESUME and resumed.player_message == "Left"
        assert [(r.runtime_id, r.status) for r in resumed.runtime_results] == [(ASKER, resources_pb2.RUNTIME_STATUS_SUCCESS)], "only the suspended agent runs"
        assert json.loads(from_struct(resumed.runtime_results[0].output)["content"]) == {"door": "left"}, "its answer after the resume"
        [closed] = (await stub.ListInteractions(scheduler_pb2.ListInteractionsRequest(session_id=session.id, include_answered=True))).interactions
        assert (closed.status, closed.answered_turn_id) == (resources_pb2.INTERACTION_STATUS_ANSWERED, resumed.id)


@pytest.mark.asyncio(loop_scope="session")
async def test_a_nested_run_that_suspends_is_dropped(asking) -> None:
    await restart_gateway(asking, {"queues": {"asker": [{"tool_calls": [{"name": "suspend", "arguments": {"interaction": DOORS}}]}]}})
    async with open_channel(asking.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(minimal_session(requested_plugins=[PROBE], approved_plugins=[PROBE]))).session
        events = [e async for e in stub.RunManual(scheduler_pb2.RunManualRequest(session_id=session.id, runtime_id=f"{PROBE}/nester"))]
        turn = events[-1].turn_completed
        [nester] = [r for r in turn.runtime_results if r.runtime_id == f"{PROBE}/nester"]
        assert from_struct(nester.output)["status"] == "failed" and "nested-suspension-dropped" in from_struct(nester.output)["reason"]
        dropped = [json.loads(e.message) for e in turn.hook_trace if e.event == "recursive.failed"]
        assert dropped and dropped[0]["code"] == "nested-suspension-dropped"
        assert not [e for e in events if e.WhichOneof("event") == "interaction"], "its question is not asked"
        assert (await stub.ListInteractions(scheduler_pb2.ListInteractionsRequest(session_id=session.id))).interactions == []


@pytest.mark.asyncio(loop_scope="session")
async def test_a_handler_suspends_and_its_held_writes_commit_when_the_answer_runs_it_again(asking) -> None:
    async with open_channel(asking.addrs["scheduler"]) as channel, asking.channel_as("store", "scheduler") as store_channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        store = store_pb2_grpc.TransactionalStoreStub(store_channel)
        session = (await stub.CreateSession(minimal_session(requested_plugins=[PROBE], approved_plugins=[PROBE]))).session

        async def data() -> dict:
            reply = await store.ListPluginData(store_pb2.ListPluginDataRequest(session_id=session.id, plugin_id=PROBE, namespace="rest"))
            return {entry.key: from_value(entry.value) for entry in reply.entries}

        events = [e async for e in stub.RunManual(scheduler_pb2.RunManualRequest(session_id=session.id, runtime_id=f"{PROBE}/confirmer"))]
        turn = events[-1].turn_completed
        [confirmer] = [r for r in turn.runtime_results if r.runtime_id == f"{PROBE}/confirmer"]
        assert confirmer.status == resources_pb2.RUNTIME_STATUS_SUSPENDED and [i.id for i in confirmer.interactions] == ["rest-here"]
        assert await data() == {}, "held: nothing commits while it waits"
        dropped = [json.loads(e.message) for e in turn.hook_trace if e.event == "recursive.failed"]
        assert [d["code"] for d in dropped] == ["nested-suspension-dropped"], "its nested run's suspension was dropped"

        events = [e async for e in stub.SubmitInteraction(scheduler_pb2.SubmitInteractionRequest(
            session_id=session.id, interaction_id="rest-here", values=to_struct({"confirmed": True})))]
        resumed = events[-1].turn_completed
        assert resumed.origin == resources_pb2.TURN_ORIGIN_RESUME and resumed.player_message == "Yes"
        [confirmer] = [r for r in resumed.runtime_results if r.runtime_id == f"{PROBE}/confirmer"]
        assert confirmer.status == resources_pb2.RUNTIME_STATUS_SUCCESS and from_struct(confirmer.output) == {"rested": True, "interaction": "rest-here"}
        assert await data() == {"asked": True, "nested": "failed", "answer": True}, "the held writes commit with the answer's run"

"""The core setup builtins through the five services: world-init, char-creator and pregame take a new session
of a world through its setup (an `advance` starts it, the character form is asked, a bad answer is refused
naming its field, the answer makes the character and the narrator opens the story in the same turn), across
a scheduler restart between question and answer; a world without a character schema gets one generated."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import grpc
import pytest
import pytest_asyncio

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from shared.grpc_client import open_channel
from shared.settings import REPO_ROOT
from shared.structs import from_struct, from_value, to_struct
from shared.ui_panels import render_text
from tests.e2e.conftest import running_services
from tests.e2e.test_suspend_resume import restart_scheduler

pytestmark = pytest.mark.asyncio(loop_scope="session")
SETUP = ("world-init/schema-gen", "char-creator/player-init", "pregame")


# The scripted model's answers when the player lights the lamp: the dimension tracker and the character tracker see it.
LAMP_RULES = [
    {"match": "light the lamp", "slots": ["world-init"],
     "reply": {"tool_calls": [{"name": "update-dimensions", "arguments": {"updates": [{"id": "lighthouse", "value": "lit"}]}}]}},
    {"match": "light the lamp", "slots": ["char-creator"],
     "reply": {"json": {"changes": [{"attribute": "courage", "value": 5, "why": "lit the lamp in a storm"}]}}},
]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def setup_services(tmp_path_factory):
    worlds = tmp_path_factory.mktemp("worlds")
    (worlds / "bare").mkdir()
    (worlds / "bare" / "world.yaml").write_text("name: Bare\ndescription: A world that brings no rules of its own.\n", encoding="utf-8")
    env = {"COVEL_WORLD_DIRS": f"{REPO_ROOT / 'worlds'}:{worlds}"}
    async with running_services(tmp_path_factory.mktemp("setup-builtins"), script={"rules": LAMP_RULES}, extra_env=env) as group:
        yield group


async def turn_of(events) -> tuple[list, dict]:
    events = [event async for event in events]
    return events, {r.runtime_id: r for r in events[-1].turn_completed.runtime_results}


async def advance(stub, session_id: str):
    return await turn_of(stub.SubmitActions(scheduler_pb2.SubmitActionsRequest(
        session_id=session_id, actions=[resources_pb2.PlayerAction(kind="advance")])))


async def answer(stub, session_id: str, values: dict, key: str = ""):
    return await turn_of(stub.SubmitInteraction(scheduler_pb2.SubmitInteractionRequest(
        session_id=session_id, interaction_id="protagonist", values=to_struct(values), idempotency_key=key)))


async def characters(group, session_id: str) -> dict[str, dict]:
    """The session's characters as the store keeps them (clients read them through the story, not an RPC)."""
    async with group.channel_as("store", "scheduler") as channel:
        world = await store_pb2_grpc.TransactionalStoreStub(channel).GetWorld(store_pb2.GetWorldRequest(session_id=session_id))
    return {c.id: from_struct(c.data) for c in world.characters}


async def dimension(group, session_id: str, dimension_id: str):
    async with group.channel_as("store", "scheduler") as channel:
        world = await store_pb2_grpc.TransactionalStoreStub(channel).GetWorld(store_pb2.GetWorldRequest(session_id=session_id))
    return next(from_value(d.value) for d in world.dimensions if d.id == dimension_id)


async def setup_progress(stub, session_id: str) -> dict[str, dict]:
    """Session.setup_runtimes without the plugin version each is recorded for."""
    session = await session_of(stub, session_id)
    return {rid: {k: v for k, v in from_struct(value).items() if k != "version"} for rid, value in session.setup_runtimes.items()}


async def session_of(stub, session_id: str):
    return (await stub.GetSession(scheduler_pb2.GetSessionRequest(session_id=session_id))).session


async def test_the_demo_world_sets_up_through_the_character_form_and_opens_the_story(setup_services) -> None:
    async with open_channel(setup_services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(world_id="demo-world"))).session
        assert session.phase == resources_pb2.SESSION_PHASE_SETUP and set(SETUP) <= set(session.setup_runtimes)

        events, results = await advance(stub, session.id)
        assert results["world-init/schema-gen"].status == resources_pb2.RUNTIME_STATUS_SKIPPED, "Saltmere brings its own character schema: waived"
        assert results["char-creator/player-init"].status == resources_pb2.RUNTIME_STATUS_SUCCESS and "narrator" not in results, "the story waits for the form"
        [asked] = [e.interaction for e in events if e.WhichOneof("event") == "interaction"]
        assert asked.id == "protagonist" and asked.kind == resources_pb2.INTERACTION_KIND_FORM and asked.plugin_id == "char-creator"
        assert from_struct(asked.spec)["fieldOrder"] == ["name", "courage", "role"], "the name, then the schema's attributes"
        progress = await setup_progress(stub, session.id)
        assert progress["world-init/schema-gen"] == {"state": "done", "resolution": "waived"}
        assert progress["char-creator/player-init"] == {"state": "pending"} and progress["pregame"] == {"state": "pending"}

        # Words while the form is open: a setup turn again, the form is not asked twice.
        _, results = await turn_of(stub.SubmitActions(scheduler_pb2.SubmitActionsRequest(
            session_id=session.id, actions=[resources_pb2.PlayerAction(text="Where am I?")])))
        assert "narrator" not in results and not results["char-creator/player-init"].interactions

        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await answer(stub, session.id, {"name": "Wren", "courage": 9})
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert refused.value.details().startswith("values.courage: 9 is greater than the maximum of 5")
        assert [r.interaction.id for r in (await stub.ListInteractions(scheduler_pb2.ListInteractionsRequest(session_id=session.id))).interactions] \
            == ["protagonist"], "a refused answer writes nothing"

        # The scheduler restarts between the question and the answer: the form and its state are in the store.
        await restart_scheduler(setup_services)

    async with open_channel(setup_services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        events, results = await answer(stub, session.id, {"name": "Wren", "role": "a lamp-maker", "courage": 4}, key="wren-1")
        turn = events[-1].turn_completed
        assert results["char-creator/player-init"].status == resources_pb2.RUNTIME_STATUS_SUCCESS and results["pregame"].status == resources_pb2.RUNTIME_STATUS_SUCCESS
        assert from_struct(results["pregame"].output)["protagonist"]["name"] == "Wren"
        assert results["narrator"].status == resources_pb2.RUNTIME_STATUS_SUCCESS and "This is where the story of Wren begins." in turn.narrative, \
            "the setup finished in this turn: the narrator opens the story with pregame's brief"
        after = await session_of(stub, session.id)
        assert after.phase == resources_pb2.SESSION_PHASE_PLAYING and after.completed_player_turns == 0, "setup and the opening are not player turns"
        assert {rid: v for rid, v in (await setup_progress(stub, session.id)).items() if rid in SETUP} == {
            "world-init/schema-gen": {"state": "done", "resolution": "waived"},
            "char-creator/player-init": {"state": "done", "resolution": "completed"},
            "pregame": {"state": "done", "resolution": "completed"}}
        hero = (await characters(setup_services, session.id))["traveller"]
        assert hero["name"] == "Wren" and hero["attributes"] == {"role": "a lamp-maker", "courage": 4}

        # The plugins' panels, with the state they draw: the character sheet shows the answer.
        panels = {p.plugin_id: p for p in (await stub.ListPanels(scheduler_pb2.ListPanelsRequest(session_id=session.id))).panels}
        assert {"char-creator", "inventory", "world-time"} <= set(panels) and {p.location for p in panels.values()} == {resources_pb2.UI_SLOT_RIGHT}
        sheet = from_struct(panels["char-creator"].state)
        assert sheet["world"]["protagonist"]["name"] == "Wren" and sheet["session"]["phase"] == "playing"
        assert render_text(from_struct(panels["char-creator"].spec), sheet)[:2] == ["Character", "Wren"]
        assert from_struct(panels["world-time"].state)["data"]["clock"]["now"]["time"] == "19:50", "the opening moved the clock"
        assert not (await stub.ListPanels(scheduler_pb2.ListPanelsRequest(session_id=session.id, location=resources_pb2.UI_SLOT_SEGMENT))).panels
        with pytest.raises(grpc.aio.AioRpcError) as where:
            await stub.ListPanels(scheduler_pb2.ListPanelsRequest(session_id=session.id, location=cast(Any, 12)))
        assert where.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "location" in where.value.details()

        with pytest.raises(grpc.aio.AioRpcError) as again:
            await answer(stub, session.id, {"name": "Other"})
        assert again.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "answered already" in again.value.details()

    # The trackers on a model that sees a change (LAMP_RULES): the lamp is lit, and the climb made Wren braver.
    async with open_channel(setup_services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        _, results = await turn_of(stub.SubmitActions(scheduler_pb2.SubmitActionsRequest(
            session_id=session.id, actions=[resources_pb2.PlayerAction(text="I climb the tower and light the lamp.")])))
        assert not set(SETUP) & set(results), "done setup runtimes do not run again"
        assert results["world-init/dimension-context"].status == resources_pb2.RUNTIME_STATUS_SUCCESS, results["world-init/dimension-context"].reason
        assert results["world-init/dimension-tracker"].status == resources_pb2.RUNTIME_STATUS_SUCCESS, results["world-init/dimension-tracker"].reason
        assert (await session_of(stub, session.id)).completed_player_turns == 1
        assert await dimension(setup_services, session.id, "lighthouse") == "lit"
        # edit-dimensions: the player's own edit, checked against the dimension's schema first.
        edited = await turn_of(stub.RunManual(scheduler_pb2.RunManualRequest(
            session_id=session.id, runtime_id="world-init/edit-dimensions", payload=to_struct({"updates": [{"id": "missing-boats", "value": 1}]}))))
        assert edited[1]["world-init/edit-dimensions"].status == resources_pb2.RUNTIME_STATUS_SUCCESS and await dimension(setup_services, session.id, "missing-boats") == 1
        refused = await turn_of(stub.RunManual(scheduler_pb2.RunManualRequest(
            session_id=session.id, runtime_id="world-init/edit-dimensions", payload=to_struct({"updates": [{"id": "missing-boats", "value": -3}]}))))
        assert refused[1]["world-init/edit-dimensions"].status == resources_pb2.RUNTIME_STATUS_FAILED
        assert "payload.updates[0].value: -3 is less than the minimum of 0" in refused[1]["world-init/edit-dimensions"].reason
        assert await dimension(setup_services, session.id, "missing-boats") == 1, "a refused edit writes nothing"
        for _ in range(100):  # character-tracker is a detached job: it commits after the turn
            if (await characters(setup_services, session.id))["traveller"]["attributes"]["courage"] == 5:
                break
            await asyncio.sleep(0.1)
        assert (await characters(setup_services, session.id))["traveller"]["attributes"] == {"role": "a lamp-maker", "courage": 5}


async def test_a_world_without_a_character_schema_gets_one_generated_before_the_form(setup_services) -> None:
    async with open_channel(setup_services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(world_id="bare"))).session
        events, results = await advance(stub, session.id)
        generated = from_struct(results["world-init/schema-gen"].output)
        assert results["world-init/schema-gen"].status == resources_pb2.RUNTIME_STATUS_SUCCESS and generated["success"] is True
        assert generated["attributeCount"] >= 15, "the scripted model fills initialize-world's 15 attributes"
        [asked] = [e.interaction for e in events if e.WhichOneof("event") == "interaction"]
        assert len(from_struct(asked.spec)["fieldOrder"]) == 13, "the name and the first 12 generated attributes"
        _, results = await answer(stub, session.id, {"name": "Ash"})
        assert results["narrator"].status == resources_pb2.RUNTIME_STATUS_SUCCESS and (await session_of(stub, session.id)).phase == resources_pb2.SESSION_PHASE_PLAYING
        made = await characters(setup_services, session.id)
        assert {cid: c["name"] for cid, c in made.items()} == {"protagonist": "Ash"}, "no preset: a new player character"
        assert made["protagonist"]["type"] == "player" and made["protagonist"]["attributes"] == {}, "only what was answered"


async def test_a_session_without_a_world_waives_the_setup_and_plays_its_first_turn(setup_services) -> None:
    async with open_channel(setup_services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest())).session
        _, results = await turn_of(stub.SubmitActions(scheduler_pb2.SubmitActionsRequest(
            session_id=session.id, actions=[resources_pb2.PlayerAction(text="Hello.")])))
        assert all(results[rid].status == resources_pb2.RUNTIME_STATUS_SKIPPED for rid in SETUP) and results["narrator"].status == resources_pb2.RUNTIME_STATUS_SUCCESS
        assert "world-init/dimension-tracker" not in results, "no dimensions: no maintainer is scheduled"
        after = await session_of(stub, session.id)
        assert after.phase == resources_pb2.SESSION_PHASE_PLAYING and {from_struct(after.setup_runtimes[rid])["resolution"] for rid in SETUP} == {"waived"}

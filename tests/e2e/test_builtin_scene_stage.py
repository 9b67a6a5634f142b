"""scene-stage through the five services on the scripted model, in the fixture world Lantern Night
(tests/fixtures/stage-worlds/lantern-night: scenes with backdrops and casts): the seed sets the opening
scene, the direction agent and the resolver commit the stage with the story, a move changes the scene
(with a notification), the clock gives the time of day, the cast is published before the story, the
story's prompt carries the stage, and the right panel draws it. Then the same with `direction: cues`."""

from __future__ import annotations

import uuid

import pytest
import pytest_asyncio

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from shared.grpc_client import open_channel
from shared.settings import REPO_ROOT
from shared.structs import from_struct, from_value, to_struct
from shared.ui_panels import render_text
from tests.e2e.conftest import NON_STORY_CORE_PLUGINS, TEST_PLUGIN_DIR, running_services

pytestmark = pytest.mark.asyncio(loop_scope="session")
WORLDS = REPO_ROOT / "tests" / "fixtures" / "stage-worlds"
# storm-cues: a story event that overrides the stage and the music when the player calls up the storm.
EVENTS = REPO_ROOT / "tests" / "fixtures" / "stage-plugins"
WORLD = "lantern-night"
STAGE_RUNTIMES = ("scene-stage/seed", "scene-stage/cast", "scene-stage/story-cues", "scene-stage/direction", "scene-stage/resolver")


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def services(tmp_path_factory):
    async with running_services(tmp_path_factory.mktemp("covel-data"), plugin_dirs=(TEST_PLUGIN_DIR, EVENTS),
                                extra_env={"COVEL_WORLD_DIRS": str(WORLDS)}) as group:
        yield group


async def session(stub, settings: dict | None = None, without: tuple[str, ...] = ("soundtrack", "character-blueprint"),
                  events: bool = False) -> str:
    """A session in Lantern Night with the story engine, world-time and scene-stage (and the storm event)."""
    excluded = [p for p in NON_STORY_CORE_PLUGINS if p != "world-time"] + list(without)
    request = scheduler_pb2.CreateSessionRequest(world_id=WORLD, excluded_plugins=excluded)
    if events:
        request.requested_plugins.append("storm-cues")
        request.approved_plugins.append("storm-cues")
    for plugin_id, values in (settings or {}).items():
        request.plugin_settings[plugin_id].CopyFrom(to_struct(values))
    return (await stub.CreateSession(request)).session.id


async def turn(stub, session_id: str, text: str):
    request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[resources_pb2.PlayerAction(kind="act", text=text)],
                                                 idempotency_key=uuid.uuid4().hex)
    events = [event async for event in stub.SubmitActions(request)]
    return events[-1].turn_completed, events


async def data(store, session_id: str, namespace: str) -> dict:
    reply = await store.ListPluginData(store_pb2.ListPluginDataRequest(session_id=session_id, plugin_id="scene-stage", namespace=namespace))
    return {entry.key: from_value(entry.value) for entry in reply.entries}


def outputs(done) -> dict:
    return {r.runtime_id: from_struct(r.output) for r in done.runtime_results}


async def test_the_stage_follows_the_story(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel, services.channel_as("store", "scheduler") as store_channel:
        stub, store = scheduler_pb2_grpc.SchedulerStub(channel), store_pb2_grpc.TransactionalStoreStub(store_channel)
        session_id = await session(stub)
        stages, casts, notes = [], [], []
        for text in ("I shake the rain off my coat and look around the inn.", "I walk down to the docks.",
                     "I wave to Mira and ask about the boats."):
            done, events = await turn(stub, session_id, text)
            assert done.status == store_pb2.TURN_STATUS_COMMITTED, done.abort_reason
            ran = {r.runtime_id: r for r in done.runtime_results}
            for runtime_id in STAGE_RUNTIMES:
                assert ran[runtime_id].status == resources_pb2.RUNTIME_STATUS_SUCCESS, (text, runtime_id, ran[runtime_id].reason)
            stages.append((await data(store, session_id, "stage"))["current"])
            casts.append(outputs(done)["scene-stage/cast"])
            notes.append([e.notification.text for e in events if e.WhichOneof("event") == "notification"])
            assert outputs(done)["scene-stage/resolver"]["scene"] == stages[-1]["scene"]
        messages = (await stub.ListMessages(scheduler_pb2.ListMessagesRequest(session_id=session_id))).messages
        panels = (await stub.ListPanels(scheduler_pb2.ListPanelsRequest(session_id=session_id))).panels

    # Turn 1: the seed set the world's start scene with its cast; the cast was published before the story.
    assert casts[0]["scene"]["name"] == "The Drowned Lantern" and [p["name"] for p in casts[0]["present"]] == ["Old Tobin", "Mira"]
    first = stages[0]
    assert first["scene"]["id"] == "inn" and first["scene"]["backdrop"] == {"src": "backdrops/inn.png", "source": "world"}
    # The clock (world-time, 19:30 at the start) sets the time of day over the scene's own.
    assert first["scene"]["timeOfDay"] in ("dusk", "evening") and first["worldId"] == WORLD
    # The story read the stage: its scene cue is the stage's scene. Whoever it shows present is on stage
    # (with the cast the scene opened with), and the direction gave them a performance.
    stories = [m for m in messages if m.role == resources_pb2.MESSAGE_ROLE_STORY and not from_struct(m.metadata).get("opening")]
    cues = from_struct(stories[0].metadata)["cues"]
    assert cues["scene"].startswith("The Drowned Lantern (the harbor of Saltmere)")
    speaker = next(a for a in first["actors"] if a["name"] == cues["present"][0])
    assert speaker["pose"] in ("facing you", "leaning in") and speaker["position"] == "near you" and speaker["since"] == 1
    assert {"Old Tobin", "Mira"} <= {a["name"] for a in first["actors"]}

    # Turn 2: the move to the docks is a new scene (its backdrop is a URL, its cast empty), and the player is told.
    second = stages[1]
    assert second["scene"]["id"] == "quay" and second["scene"]["backdrop"]["source"] == "url" and second["since"] == 2
    assert "scene" in second["changed"] and "Old Tobin" in second["left"]
    assert notes[0] == [] and "The scene moves to The quay." in notes[1]
    assert casts[1]["scene"]["name"] == "The Drowned Lantern" and casts[2]["scene"]["name"] == "The quay"
    # Turn 3: still on the quay; the story's next scene cue is the quay now.
    assert stages[2]["scene"]["id"] == "quay" and stages[2]["since"] == 2
    assert from_struct(stories[2].metadata)["cues"]["scene"].startswith("The quay")

    # The right panel draws the stage.
    panel = next(p for p in panels if p.plugin_id == "scene-stage")
    text = render_text(from_struct(panel.spec), from_struct(panel.state))
    assert text[0].startswith("Stage") and any("The quay" in line for line in text)


async def test_the_cues_can_direct_the_stage_without_a_model(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel, services.channel_as("store", "scheduler") as store_channel:
        stub, store = scheduler_pb2_grpc.SchedulerStub(channel), store_pb2_grpc.TransactionalStoreStub(store_channel)
        session_id = await session(stub, {"scene-stage": {"direction": "cues"}})
        done, _ = await turn(stub, session_id, "I sit by the fire and listen to the rain.")
        assert done.status == store_pb2.TURN_STATUS_COMMITTED, done.abort_reason
        ran = {r.runtime_id: r for r in done.runtime_results}
        stage = (await data(store, session_id, "stage"))["current"]
    assert ran["scene-stage/direction"].status == resources_pb2.RUNTIME_STATUS_SKIPPED
    assert ran["scene-stage/resolver"].status == resources_pb2.RUNTIME_STATUS_SUCCESS
    assert from_struct(ran["scene-stage/direction"].output)["reason"] == "the story's cues"
    # The story's cue names the same place: the scene stays, the speaker stays on stage.
    assert stage["scene"]["id"] == "inn" and {a["name"] for a in stage["actors"]} <= {"Old Tobin", "Mira"}


async def test_a_story_event_overrides_the_time_and_a_performance(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel, services.channel_as("store", "scheduler") as store_channel:
        stub, store = scheduler_pb2_grpc.SchedulerStub(channel), store_pb2_grpc.TransactionalStoreStub(store_channel)
        session_id = await session(stub, events=True)
        calm, _ = await turn(stub, session_id, "I order a bowl of soup.")
        before = (await data(store, session_id, "stage"))["current"]
        storm, _ = await turn(stub, session_id, "I open the shutters and the storm comes howling in.")
        after = (await data(store, session_id, "stage"))["current"]
    for done in (calm, storm):
        ran = {r.runtime_id: r for r in done.runtime_results}
        assert ran["storm-cues/stage"].status == ran["scene-stage/resolver"].status == resources_pb2.RUNTIME_STATUS_SUCCESS
    assert before["scene"]["timeOfDay"] in ("dusk", "evening") and before["scene"]["lighting"] == "warm lamplight"
    # The event's direction is applied after the agent's: its time of day, lighting and Tobin's performance win.
    assert (after["scene"]["id"], after["scene"]["timeOfDay"], after["scene"]["lighting"]) == ("inn", "midnight", "lightning flashes")
    tobin = next(a for a in after["actors"] if a.get("id") == "tobin")
    assert (tobin["pose"], tobin["expression"]) == ("under a table", "terrified")
    assert after["reason"].endswith("the storm breaks") and after["turn"] == 2

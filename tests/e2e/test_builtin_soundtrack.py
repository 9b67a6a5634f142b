"""soundtrack through the five services on the scripted model, in the fixture world Lantern Night
(tests/fixtures/stage-worlds/lantern-night: music/tracks.yaml with files and a URL): with scene-stage,
the stage's scene picks the track and a move changes it; alone, the story's scene and mood cues do.
What plays is committed (track, why, since which turn), announced when it changes and drawn in the panel."""

from __future__ import annotations

import uuid

import pytest
import pytest_asyncio
import yaml

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
TRACKS = {t["id"]: t for t in yaml.safe_load((WORLDS / WORLD / "music" / "tracks.yaml").read_text())}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def services(tmp_path_factory):
    async with running_services(tmp_path_factory.mktemp("covel-data"), plugin_dirs=(TEST_PLUGIN_DIR, EVENTS),
                                extra_env={"COVEL_WORLD_DIRS": str(WORLDS)}) as group:
        yield group


async def session(stub, without: tuple[str, ...], settings: dict | None = None, events: bool = False) -> str:
    request = scheduler_pb2.CreateSessionRequest(world_id=WORLD, excluded_plugins=[*NON_STORY_CORE_PLUGINS, *without])
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
    done = events[-1].turn_completed
    assert done.status == store_pb2.TURN_STATUS_COMMITTED, done.abort_reason
    for result in done.runtime_results:
        if result.runtime_id.startswith("soundtrack/"):
            assert result.status == resources_pb2.RUNTIME_STATUS_SUCCESS, (text, result.runtime_id, result.reason)
    music = [e.notification.text for e in events if e.WhichOneof("event") == "notification" and e.notification.title == "Music"]
    blocks = [(e.ui.plugin_id, e.ui.title, [from_struct(p) for p in e.ui.parts]) for e in events if e.WhichOneof("event") == "ui"]
    return done, music, blocks


async def playing(store, session_id: str) -> dict | None:
    reply = await store.ListPluginData(store_pb2.ListPluginDataRequest(session_id=session_id, plugin_id="soundtrack", namespace="playing"))
    return {entry.key: from_value(entry.value) for entry in reply.entries}.get("current")


async def test_the_stage_picks_the_music_and_a_move_changes_it(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel, services.channel_as("store", "scheduler") as store_channel:
        stub, store = scheduler_pb2_grpc.SchedulerStub(channel), store_pb2_grpc.TransactionalStoreStub(store_channel)
        session_id = await session(stub, ("character-blueprint",), {"soundtrack": {"followMood": False}})
        found = []
        for text in ("I look around the inn.", "I walk down to the docks.", "I wait in the rain."):
            done, music, blocks = await turn(stub, session_id, text)
            found.append((await playing(store, session_id), music))
            if music:
                # The UI block with the track, shown with the turn.
                assert ("soundtrack", "Music", [{"type": "text", "text": f"♪ {found[-1][0]['track']['title']}"},
                                                {"type": "kv", "label": "because of", "value": f"scene: {found[-1][0]['scene']}"}]) in blocks
        panels = (await stub.ListPanels(scheduler_pb2.ListPanelsRequest(session_id=session_id))).panels
    (first, said1), (second, said2), (third, said3) = found
    assert first["track"] == {"id": "hearth", "title": "By the Hearth", "src": "music/hearth.ogg", "source": "world", "loop": True}
    assert (first["why"], first["since"], first["scene"], first["worldId"]) == ("scene", 1, "inn", WORLD)
    assert said1 == ["Now playing: By the Hearth"]
    assert (second["track"]["id"], second["why"], second["since"], second["previous"]) == ("tide", "scene", 2, "hearth")
    assert said2 == ["Now playing: Grey Tide"]
    assert third == second and said3 == []
    panel = next(p for p in panels if p.plugin_id == "soundtrack")
    text = render_text(from_struct(panel.spec), from_struct(panel.state))
    assert text[0].startswith("Music") and any("♪ Grey Tide" in line for line in text)


async def test_alone_the_story_cues_set_the_music_and_the_mood_changes_it(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel, services.channel_as("store", "scheduler") as store_channel:
        stub, store = scheduler_pb2_grpc.SchedulerStub(channel), store_pb2_grpc.TransactionalStoreStub(store_channel)
        session_id = await session(stub, ("scene-stage", "character-blueprint"))
        before = None
        for number, text in enumerate(("I look around.", "I ask the stranger what she wants.", "I laugh and order a drink.",
                                       "I step outside."), start=1):
            done, music, _ = await turn(stub, session_id, text)
            now = await playing(store, session_id)
            cues = from_struct(next(r for r in done.runtime_results if r.runtime_id == "soundtrack/story-cues").output)
            assert now is not None and now["track"]["id"] in TRACKS
            moods = {t["id"] for t in TRACKS.values() if cues.get("mood") in t.get("moods", [])}
            if moods:
                # followMood: the track playing fits the story's mood.
                assert now["track"]["id"] in moods, (cues, now)
            if before is None or now["track"]["id"] != before["track"]["id"]:
                assert music == [f"Now playing: {now['track']['title']}"] and now["since"] == number
                assert now["why"] in ("scene", "mood", "default")
            else:
                assert music == [] and now["since"] == before["since"]
            before = now


async def test_a_story_event_overrides_the_music(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel, services.channel_as("store", "scheduler") as store_channel:
        stub, store = scheduler_pb2_grpc.SchedulerStub(channel), store_pb2_grpc.TransactionalStoreStub(store_channel)
        session_id = await session(stub, ("character-blueprint",), {"soundtrack": {"followMood": False}}, events=True)
        await turn(stub, session_id, "I look around the inn.")
        done, music, _ = await turn(stub, session_id, "The storm tears the door open.")
        now = await playing(store, session_id)
    assert (now["track"]["id"], now["track"]["source"], now["why"], now["reason"], now["since"]) == \
        ("squall", "url", "override", "the storm breaks", 2)
    assert now["track"]["src"] == "https://example.com/music/squall.ogg" and now["previous"] == "hearth"
    assert music == ["Now playing: Squall"]

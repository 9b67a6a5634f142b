"""character-blueprint through the five services on the scripted model, in the fixture world Lantern Night
(tests/fixtures/stage-worlds/lantern-night: each character's `blueprint` with media files and a URL): the
profiles reach the story's prompt (the scripted story casts its speaker from them), `presence` publishes who
is present with their media after each turn (with scene-stage's cast when it runs), keeps them in `present`,
and the right panel lists them."""

from __future__ import annotations

import uuid

import pytest
import pytest_asyncio

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from shared.grpc_client import open_channel
from shared.settings import REPO_ROOT
from shared.structs import from_struct, from_value
from shared.ui_panels import render_text
from tests.e2e.conftest import NON_STORY_CORE_PLUGINS, TEST_PLUGIN_DIR, running_services

pytestmark = pytest.mark.asyncio(loop_scope="session")
WORLDS = REPO_ROOT / "tests" / "fixtures" / "stage-worlds"
WORLD = "lantern-night"
NAMES = {"Mira": "mira", "Old Tobin": "tobin", "Sela": "sela"}
MIRA_MEDIA = {"avatar": {"src": "media/mira-avatar.png", "source": "world"}, "portrait": {"src": "media/mira-portrait.png", "source": "world"},
              "voice": {"src": "https://example.com/voices/mira.ogg", "source": "url"}}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def services(tmp_path_factory):
    async with running_services(tmp_path_factory.mktemp("covel-data"), plugin_dirs=(TEST_PLUGIN_DIR,),
                                extra_env={"COVEL_WORLD_DIRS": str(WORLDS)}) as group:
        yield group


async def session(stub, without: tuple[str, ...]) -> str:
    request = scheduler_pb2.CreateSessionRequest(world_id=WORLD, excluded_plugins=[*NON_STORY_CORE_PLUGINS, *without])
    return (await stub.CreateSession(request)).session.id


async def turn(stub, session_id: str, text: str):
    request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[resources_pb2.PlayerAction(kind="act", text=text)],
                                                 idempotency_key=uuid.uuid4().hex)
    done = [event async for event in stub.SubmitActions(request)][-1].turn_completed
    assert done.status == store_pb2.TURN_STATUS_COMMITTED, done.abort_reason
    presence = next(r for r in done.runtime_results if r.runtime_id == "character-blueprint/presence")
    assert presence.status == resources_pb2.RUNTIME_STATUS_SUCCESS, presence.reason
    return done, from_struct(presence.output)


async def data(store, session_id: str, namespace: str) -> dict:
    reply = await store.ListPluginData(store_pb2.ListPluginDataRequest(session_id=session_id, plugin_id="character-blueprint", namespace=namespace))
    return {entry.key: from_value(entry.value) for entry in reply.entries}


def story_cues(done) -> dict:
    narrator = next(r for r in done.runtime_results if r.runtime_id == "narrator")
    return from_struct(narrator.output).get("cues") or {}


async def test_profiles_reach_the_story_and_presence_follows_it(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel, services.channel_as("store", "scheduler") as store_channel:
        stub, store = scheduler_pb2_grpc.SchedulerStub(channel), store_pb2_grpc.TransactionalStoreStub(store_channel)
        session_id = await session(stub, ("scene-stage", "soundtrack"))
        profiles = await data(store, session_id, "profiles")
        done, first = await turn(stub, session_id, "I shake the rain off my coat and look around.")
        present = await data(store, session_id, "present")
        roster = await data(store, session_id, "roster")
        cues = story_cues(done)
        done, second = await turn(stub, session_id, "I ask Sela about the lens.")
        panels = (await stub.ListPanels(scheduler_pb2.ListPanelsRequest(session_id=session_id))).panels

    # The world's blueprints were imported with the session, keyed by the character's id.
    assert set(profiles) == {"mira", "tobin", "sela"} and profiles["mira"]["media"]["voice"] == "https://example.com/voices/mira.ogg"
    # The story cast its speaker from the profiles the prompt segment gave it (the scripted model reads
    # "Characters:"), and presence published them with their media.
    [speaker] = cues["present"]
    assert speaker in NAMES
    assert [(c["id"], c["since"]) for c in first["characters"]] == [(NAMES[speaker], 1)] and first["worldId"] == WORLD
    assert first["entered"] == [NAMES[speaker]] and first["left"] == [] and first["unresolved"] == []
    if speaker == "Mira":
        assert first["characters"][0]["media"] == MIRA_MEDIA
    assert set(present) == {NAMES[speaker]} and present[NAMES[speaker]]["lastSeen"] == 1
    assert roster == {"mira": {"name": "Mira", "aliases": ["米拉"]}, "tobin": {"name": "Old Tobin", "aliases": ["Tobin", "老托宾"]},
                      "sela": {"name": "Sela", "aliases": ["塞拉"]}}
    # The same session's story keeps its speaker; whoever its cues list is who is present now.
    assert [c["id"] for c in second["characters"]] == [NAMES[n] for n in story_cues(done)["present"]]
    panel = next(p for p in panels if p.plugin_id == "character-blueprint")
    text = render_text(from_struct(panel.spec), from_struct(panel.state))
    assert text[0].startswith("Present") and any(speaker in line for line in text)


async def test_with_scene_stage_the_cast_on_stage_is_present_too(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel, services.channel_as("store", "scheduler") as store_channel:
        stub, store = scheduler_pb2_grpc.SchedulerStub(channel), store_pb2_grpc.TransactionalStoreStub(store_channel)
        session_id = await session(stub, ("soundtrack",))
        done, first = await turn(stub, session_id, "I look around the inn.")
        present = await data(store, session_id, "present")
    # The stage opened in the inn with Old Tobin and Mira (scene-stage's cast, published before the story).
    ids = [c["id"] for c in first["characters"]]
    assert {"tobin", "mira"} <= set(ids) and set(present) == set(ids)
    mira = next(c for c in first["characters"] if c["id"] == "mira")
    assert mira["media"] == MIRA_MEDIA and mira["role"] == "the harbor-master" and mira["profile"] is True
    assert present["tobin"]["avatar"] == "media/tobin-avatar.png"

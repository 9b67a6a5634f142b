"""Worlds through the five services: the registry loads the world folders (COVEL_WORLD_DIRS), the
scheduler's ListWorlds / GetWorld serve them to clients, and CreateSession(world_id) starts a session
with the world's opening, characters, character schema, dimensions, plugins and settings presets.
A broken world is listed as failed with its diagnostics, and no session starts in it."""

from __future__ import annotations

import os
import shutil

import grpc
import pytest
import pytest_asyncio

from covel.common.v1 import common_pb2
from covel.registry.v1 import registry_pb2
from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from shared.errors import field_violations
from shared.grpc_client import open_channel
from shared.settings import REPO_ROOT
from shared.structs import from_struct, to_struct
from tests.e2e.conftest import NON_STORY_CORE_PLUGINS, TEST_PLUGIN_DIR, running_services

pytestmark = pytest.mark.asyncio(loop_scope="session")

FIXTURE_WORLDS = REPO_ROOT / "tests" / "fixtures" / "worlds"
WORLD_PLUGINS = REPO_ROOT / "tests" / "fixtures" / "world-plugins"
PROBE = "rules-probe"  # writes a marker at SessionStart: proof a session was (not) created


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def world_services(tmp_path_factory):
    worlds = tmp_path_factory.mktemp("worlds")
    broken = shutil.copytree(FIXTURE_WORLDS / "tidefall", worlds / "broken")
    (broken / "cast.yaml").write_text("- {id: wren, name: Wren, attributes: {luck: 3}}\n", encoding="utf-8")
    text = (broken / "world.yaml").read_text(encoding="utf-8").replace("initial: 1", "initial: 9")
    (broken / "world.yaml").write_text(text, encoding="utf-8")
    (worlds / "sparse").mkdir()
    (worlds / "sparse" / "world.yaml").write_text("name: Sparse\npluginPolicy: {plus: [not-installed]}\n", encoding="utf-8")
    env = {"COVEL_WORLD_DIRS": os.pathsep.join([str(FIXTURE_WORLDS), str(worlds)])}
    async with running_services(tmp_path_factory.mktemp("covel-data"), plugin_dirs=(TEST_PLUGIN_DIR, WORLD_PLUGINS), extra_env=env) as group:
        yield group


async def test_list_worlds_gives_every_world_with_its_state_and_diagnostics(world_services) -> None:
    async with open_channel(world_services.addrs["scheduler"]) as channel:
        listed = (await scheduler_pb2_grpc.SchedulerStub(channel).ListWorlds(scheduler_pb2.ListWorldsRequest(locale="zh"))).worlds
    by_id = {world.id: world for world in listed}
    assert list(by_id) == ["tidefall", "broken", "sparse"]
    tidefall = by_id["tidefall"]
    assert (tidefall.state, tidefall.name, tidefall.locale, list(tidefall.locales)) == (registry_pb2.WORLD_STATE_LOADED, "潮落城", "zh", ["zh"])
    assert from_struct(tidefall.author)["name"] == "Jane Doe" and not tidefall.characters, "a summary"
    broken = by_id["broken"]
    assert broken.state == registry_pb2.WORLD_STATE_FAILED
    errors = {(d.code, d.file, d.field_path) for d in broken.diagnostics if d.severity == common_pb2.SEVERITY_ERROR}
    assert {("unknown-attribute", "cast.yaml", "[0].attributes.luck"), ("dimension-initial-invalid", "world.yaml", "dimensions.dread.initial")} <= errors
    assert by_id["sparse"].state == registry_pb2.WORLD_STATE_LOADED and list(by_id["sparse"].missing_plugins) == ["not-installed"]


async def test_get_world_gives_what_a_session_starts_with(world_services) -> None:
    async with open_channel(world_services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        world = (await stub.GetWorld(scheduler_pb2.GetWorldRequest(world_id="tidefall"))).world
        with pytest.raises(grpc.aio.AioRpcError) as missing:
            await stub.GetWorld(scheduler_pb2.GetWorldRequest(world_id="atlantis"))
        with pytest.raises(grpc.aio.AioRpcError) as unnamed:
            await stub.GetWorld(scheduler_pb2.GetWorldRequest())
    assert world.opening.startswith("The tide goes out") and [from_struct(c)["id"] for c in world.characters] == ["wren", "ossa"]
    assert [d.id for d in world.dimensions] == ["tide", "dread"] and list(world.plugin_policy.requires) == ["example.facts@1"]
    assert [(s.contract, s.visibility) for s in world.data][:2] == [("example.facts@1", resources_pb2.DATA_VISIBILITY_PUBLIC),
                                                           ("example.rules@1", resources_pb2.DATA_VISIBILITY_HIDDEN)]
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND and "atlantis" in missing.value.details()
    assert [v.field for v in field_violations(missing.value)] == ["world_id"]
    assert unnamed.value.code() == grpc.StatusCode.INVALID_ARGUMENT and [v.field for v in field_violations(unnamed.value)] == ["world_id"]


async def test_a_session_in_a_world_starts_with_the_world(world_services) -> None:
    async with open_channel(world_services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        created = await stub.CreateSession(scheduler_pb2.CreateSessionRequest(
            world_id="tidefall", locale="zh", excluded_plugins=NON_STORY_CORE_PLUGINS, approved_plugins=["lore-keeper"],
            plugin_settings={"narrator": to_struct({"person": "third"})}))
        session = created.session
        messages = (await stub.ListMessages(scheduler_pb2.ListMessagesRequest(session_id=session.id))).messages
        turn = None
        async for event in stub.SubmitActions(scheduler_pb2.SubmitActionsRequest(
                session_id=session.id, actions=[resources_pb2.PlayerAction(kind="do", text="I look at the spires.")])):
            if event.WhichOneof("event") == "turn_completed":
                turn = event.turn_completed
    assert session.world_id == "tidefall" and session.title == "潮落城"
    assert list(session.requested_plugins) == ["lore-keeper", "dice-check"]
    assert {"lore-keeper", "dice-check", "narrator"} <= set(session.active_plugins)
    # The world's presets under the player's own values.
    assert from_struct(session.plugin_settings["dice-check"]) == {"dc": 12}
    assert from_struct(session.plugin_settings["narrator"]) == {"person": "third"}
    assert [(m.seq, m.role, m.text) for m in messages] == [(1, resources_pb2.MESSAGE_ROLE_STORY, "潮水退去，潮落城的尖塔从泥中升起。")]
    assert turn is not None
    reader = next(r for r in turn.runtime_results if r.runtime_id == "lore-keeper/reader")
    assert reader.status == resources_pb2.RUNTIME_STATUS_SUCCESS, reader.reason
    seen = from_struct(reader.output)
    assert [(c["id"], c["name"], c["type"]) for c in seen["characters"]] == [("ossa", "溺亡的奥莎", "spirit"), ("wren", "Wren", "player")]
    assert seen["characters"][0]["aliases"] == ["Ossa", "奥莎"] and seen["characters"][0]["attributes"] == {"courage": 2, "oath": "broken"}
    assert "blueprint" not in seen["characters"][0], "a characterField is the plugin's data, not the character's"
    assert seen["schemaTypes"] == ["player", "npc", "spirit"] and seen["attributes"] == ["courage", "oath"]
    assert seen["dimensions"] == {"tide": {"name": "潮汐", "value": {"level": "low", "hoursLeft": 6}, "version": 1},
                                  "dread": {"name": "Dread", "value": 1, "version": 1}}
    assert seen["record"]["id"] == "tidefall" and seen["record"]["name"] == "潮落城", "worldRecord is the world's record, in the locale"
    assert seen["record"]["dimensionInitials"] == {"tide": {"level": "low", "hoursLeft": 6}, "dread": 1}
    # The world's data reached the plugin that accepts each contract, hidden rules in its _hidden namespace, in Chinese.
    data = seen["data"]
    assert data["facts"]["bells"]["text"] == "潮水转向时，钟声响起。" and sorted(data["facts"]) == ["bells", "ebb"]
    assert sorted(data["_hidden.rules"]) == ["calm", "flood"] and data["_hidden.rules"]["flood"]["then"] == "The streets flood."
    assert sorted(data["lore"]) == ["founding"] and data["blueprints"] == {"ossa": {"voice": "whispering"}}


async def test_world_records_reach_sessions_not_clients(world_services) -> None:
    """GetWorld describes the data sources; the records (hidden ones too) go only to the sessions' plugins."""
    async with open_channel(world_services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(
            world_id="tidefall", excluded_plugins=NON_STORY_CORE_PLUGINS, approved_plugins=["lore-keeper"]))).session
        world = (await stub.GetWorld(scheduler_pb2.GetWorldRequest(world_id="tidefall"))).world
    text = str(world)
    assert "The streets flood." not in text and "The bells ring" not in text, "GetWorld shows sources, not records"
    assert session.id


async def test_no_session_starts_in_an_unknown_or_failed_world(world_services, tmp_path) -> None:
    marker = tmp_path / "sessions.log"
    probe = {"requested_plugins": [PROBE], "approved_plugins": [PROBE], "plugin_settings": {PROBE: to_struct({"marker": str(marker)})}}
    async with open_channel(world_services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as unknown:
            await stub.CreateSession(scheduler_pb2.CreateSessionRequest(world_id="atlantis", **probe))
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await stub.CreateSession(scheduler_pb2.CreateSessionRequest(world_id="broken", **probe))
    assert unknown.value.code() == grpc.StatusCode.NOT_FOUND and [v.field for v in field_violations(unknown.value)] == ["world_id"]
    assert failed.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "world `broken` failed to load" in failed.value.details()
    assert "cast.yaml:[0].attributes.luck: unknown-attribute" in failed.value.details()
    assert not marker.exists(), "no session was created: SessionStart never ran"


async def test_a_world_plugin_that_is_not_installed_is_left_out_and_reported(world_services) -> None:
    async with open_channel(world_services.addrs["scheduler"]) as channel:
        created = await scheduler_pb2_grpc.SchedulerStub(channel).CreateSession(scheduler_pb2.CreateSessionRequest(world_id="sparse"))
    assert "not-installed" not in created.session.requested_plugins and created.session.title == "Sparse"
    assert [(r.plugin_id, r.code) for r in created.rejected if r.plugin_id == "not-installed"] == [("not-installed", resources_pb2.PLUGIN_REJECTION_NOT_INSTALLED)]

"""Memory blocks through the real services: an agent that imports memory.block-edit@1 edits a block,
the value commits with its run, the story reads the blocks with a value in its system prompt, and an
edit past the block's limit is refused."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import pytest_asyncio

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from shared.grpc_client import open_channel
from shared.structs import from_value
from tests.e2e.conftest import NON_STORY_CORE_PLUGINS, TEST_PLUGIN_DIR, running_services
from tests.e2e.test_history_transform import PROBE
from tests.support.builtin_plugins import SETUP_PLUGINS

pytestmark = pytest.mark.asyncio(loop_scope="session")
KEEPER = "block-keeper"
# A world that brings its own blocks by convention (memory-blocks.yaml): a read-only one and a new first scene.
WORLD_BLOCKS = """\
- {label: oath, description: The vow the player swore., limit: 120, readOnly: true, value: Find the keeper of the light.}
- {label: scene, value: The quay of Saltmere at dusk.}
"""


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def world_services(tmp_path_factory):
    worlds = tmp_path_factory.mktemp("block-worlds")
    (worlds / "vow").mkdir()
    (worlds / "vow" / "world.yaml").write_text("name: Vow\nopening: The coach leaves you on the quay.\n", encoding="utf-8")
    (worlds / "vow" / "memory-blocks.yaml").write_text(WORLD_BLOCKS, encoding="utf-8")
    env = {"COVEL_WORLD_DIRS": os.pathsep.join([str(worlds)])}
    async with running_services(tmp_path_factory.mktemp("covel-data"), plugin_dirs=(TEST_PLUGIN_DIR,), extra_env=env) as group:
        yield group


async def blocks(services, session_id: str) -> dict:
    async with services.channel_as("store", "scheduler") as channel:
        reply = await store_pb2_grpc.TransactionalStoreStub(channel).ListPluginData(
            store_pb2.ListPluginDataRequest(session_id=session_id, plugin_id="memory", namespace="blocks"))
    return {entry.key: from_value(entry.value) for entry in reply.entries}


async def test_an_agent_edits_a_block_the_story_reads_it_and_the_limit_holds(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        excluded = [plugin for plugin in NON_STORY_CORE_PLUGINS if plugin != "memory"]
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(
            requested_plugins=["memory", KEEPER, PROBE], approved_plugins=[KEEPER, PROBE], excluded_plugins=excluded))).session

        async def play(text: str):
            events = [e async for e in stub.SubmitActions(scheduler_pb2.SubmitActionsRequest(
                session_id=session.id, actions=[resources_pb2.PlayerAction(text=text)]))]
            turn = events[-1].turn_completed
            assert turn.status == resources_pb2.TURN_STATUS_COMMITTED
            return {r.runtime_id: r for r in turn.runtime_results}

        ran = await play("I enter the inn. Remember: The inn is called the Drowned Lantern.")
        assert ran[KEEPER].status == resources_pb2.RUNTIME_STATUS_SUCCESS, ran[KEEPER].reason
        scene = (await blocks(services, session.id))["scene"]
        assert scene["value"] == "The inn is called the Drowned Lantern." and scene["limit"] == 600 and scene["readOnly"] is False
        # Before the edit the blocks were all empty: the first story prompt had none.
        assert "Memory blocks:" not in story_prompts_system(services, session.id)[0]

        await play("I sit down by the fire.")
        system = story_prompts_system(services, session.id)[-1]
        assert '<scene chars="38/600">' in system and "The inn is called the Drowned Lantern." in system
        assert "<player" not in system, "a reader sees only the blocks with a value"
        assert "memory-block-edit" not in system, "the story cannot edit: it is not told how"

        ran = await play("Remember: " + "a very long note " * 40)
        assert ran[KEEPER].status == resources_pb2.RUNTIME_STATUS_SUCCESS
        assert (await blocks(services, session.id))["scene"]["value"] == "The inn is called the Drowned Lantern.", "past the limit: refused"


def story_prompts_system(services, session_id: str) -> list[str]:
    """The system prompt of each story run of the session, as transform-probe wrote it down."""
    path = Path(services.data_dir) / f"{PROBE}.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return [row.get("system") or "" for row in rows if row["session"] == session_id]


async def test_a_worlds_blocks_are_imported_and_the_story_reads_them(world_services) -> None:
    async with open_channel(world_services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(
            world_id="vow", requested_plugins=[PROBE], approved_plugins=[PROBE], excluded_plugins=list(SETUP_PLUGINS)))).session
        imported = await blocks(world_services, session.id)
        assert imported["oath"] == {"label": "oath", "description": "The vow the player swore.", "limit": 120, "readOnly": True,
                                    "value": "Find the keeper of the light."}
        assert imported["scene"] == {"label": "scene", "value": "The quay of Saltmere at dusk."}
        events = [e async for e in stub.SubmitActions(scheduler_pb2.SubmitActionsRequest(
            session_id=session.id, actions=[resources_pb2.PlayerAction(text="I look around.")]))]
        assert events[-1].turn_completed.status == resources_pb2.TURN_STATUS_COMMITTED
    system = story_prompts_system(world_services, session.id)[-1]
    # The world's scene keeps the default's limit; its own block is read-only.
    assert '<scene chars="29/600">' in system and '<oath chars="29/120" read-only="true">' in system
    assert system.index("<scene") < system.index("<oath")

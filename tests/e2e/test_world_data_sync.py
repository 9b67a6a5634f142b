"""World data sync through the real services (issue 40): SyncWorldData brings a running session's world data to
its world package as it is now: a changed record set, a new one added, one the world dropped removed (only of those
the world gave), a plugin's own record kept; dry_run only says what would change."""

from __future__ import annotations

import shutil

import grpc
import pytest
import pytest_asyncio
import yaml

from covel.registry.v1 import registry_pb2, registry_pb2_grpc
from covel.scheduler.v1 import scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from shared.errors import error_info
from shared.grpc_client import open_channel
from shared.settings import REPO_ROOT
from shared.structs import from_value, to_value
from tests.e2e.conftest import NON_STORY_CORE_PLUGINS, TEST_PLUGIN_DIR, minimal_session, running_services

pytestmark = pytest.mark.asyncio(loop_scope="session")
FIXTURE_WORLD = REPO_ROOT / "tests" / "fixtures" / "worlds" / "tidefall"
WORLD_PLUGINS = REPO_ROOT / "tests" / "fixtures" / "world-plugins"
KEEPER = "lore-keeper"


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def sync_services(tmp_path_factory):
    worlds = tmp_path_factory.mktemp("worlds")
    shutil.copytree(FIXTURE_WORLD, worlds / "tidefall")
    # Its translation names the record the test drops from the world: a translation of no record fails the world.
    (worlds / "tidefall" / "data" / "facts.zh.yaml").unlink()
    env = {"COVEL_WORLD_DIRS": str(worlds)}
    async with running_services(
        tmp_path_factory.mktemp("covel-data"), plugin_dirs=(TEST_PLUGIN_DIR, WORLD_PLUGINS), extra_env=env
    ) as group:
        group.worlds = worlds
        yield group


async def facts(services, session_id: str) -> dict[str, dict]:
    async with services.channel_as("store", "scheduler") as channel:
        entries = (
            await store_pb2_grpc.TransactionalStoreStub(channel).ListPluginData(
                store_pb2.ListPluginDataRequest(session_id=session_id, plugin_id=KEEPER, namespace="facts")
            )
        ).entries
    return {e.key: from_value(e.value) for e in entries}


def changes(reply) -> set[tuple[str, str, str]]:
    return {(c.namespace, c.key, c.change) for c in reply.changes if c.plugin_id == KEEPER}


async def test_a_sync_sets_what_the_world_changed_and_removes_only_what_it_gave(sync_services) -> None:
    async with open_channel(sync_services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (
            await stub.CreateSession(
                scheduler_pb2.CreateSessionRequest(
                    world_id="tidefall", excluded_plugins=NON_STORY_CORE_PLUGINS, approved_plugins=[KEEPER]
                )
            )
        ).session
        before = await facts(sync_services, session.id)
        assert {"bells", "ebb"} <= set(before)
        # A record of the plugin's own (an operator's write here): no world gave it, so no sync removes it.
        async with sync_services.channel_as("store", "operator") as store_channel:
            await store_pb2_grpc.TransactionalStoreStub(store_channel).AdminPutPluginData(
                store_pb2.AdminPutPluginDataRequest(
                    session_id=session.id,
                    plugin_id=KEEPER,
                    namespace="facts",
                    key="mine",
                    value=to_value({"id": "mine", "text": "Mine."}),
                    operator="test",
                )
            )
        nothing = await stub.SyncWorldData(scheduler_pb2.SyncWorldDataRequest(session_id=session.id))
        assert not nothing.changes and nothing.unchanged > 0

        # The world changes: a fact reworded, one dropped, one added.
        path = sync_services.worlds / "tidefall" / "data" / "facts.yaml"
        records = yaml.safe_load(path.read_text(encoding="utf-8"))
        records = [{**r, "text": "The bells are silent now."} if r["id"] == "bells" else r for r in records if r["id"] != "ebb"]
        path.write_text(yaml.safe_dump([*records, {"id": "moon", "text": "The moon pulls the sea away."}]), encoding="utf-8")
        async with sync_services.channel_as("registry", "operator") as registry_channel:
            await registry_pb2_grpc.PluginRegistryStub(registry_channel).Reload(registry_pb2.ReloadRequest())

        planned = await stub.SyncWorldData(scheduler_pb2.SyncWorldDataRequest(session_id=session.id, dry_run=True))
        expected = {("facts", "bells", "changed"), ("facts", "ebb", "removed"), ("facts", "moon", "added")}
        assert planned.dry_run and changes(planned) == expected and planned.generation > 0
        assert await facts(sync_services, session.id) == {**before, "mine": {"id": "mine", "text": "Mine."}}, (
            "a dry run writes nothing"
        )

        synced = await stub.SyncWorldData(scheduler_pb2.SyncWorldDataRequest(session_id=session.id))
        assert not synced.dry_run and changes(synced) == expected
        after = await facts(sync_services, session.id)
        assert after["bells"]["text"] == "The bells are silent now." and after["moon"]["text"] == "The moon pulls the sea away."
        assert "ebb" not in after and after["mine"] == {"id": "mine", "text": "Mine."}
        again = await stub.SyncWorldData(scheduler_pb2.SyncWorldDataRequest(session_id=session.id))
        assert not again.changes, "a second sync finds nothing to do"
    async with sync_services.channel_as("store", "scheduler") as channel:
        listed = (
            await store_pb2_grpc.TransactionalStoreStub(channel).ListPluginData(
                store_pb2.ListPluginDataRequest(session_id=session.id)
            )
        ).entries
    assert all(e.plugin_id != "framework" for e in listed), "the kernel's list of managed records is not plugin data"


async def test_a_session_without_a_world_has_nothing_to_sync(sync_services) -> None:
    async with open_channel(sync_services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(minimal_session())).session
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.SyncWorldData(scheduler_pb2.SyncWorldDataRequest(session_id=session.id))
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION and error_info(refused.value).reason == "NO_WORLD"

"""A plugin that disappears after a session chose it: the session keeps playing without it."""

from __future__ import annotations

import shutil

import pytest
import pytest_asyncio

from covel.registry.v1 import registry_pb2, registry_pb2_grpc
from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2
from shared.grpc_client import open_channel
from shared.settings import REPO_ROOT
from tests.e2e.conftest import minimal_session, running_services

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def changing_services(tmp_path_factory):
    data = tmp_path_factory.mktemp("changes")
    community = data / "community"
    community.mkdir()
    shutil.copytree(REPO_ROOT / "tests" / "fixtures" / "plugins" / "graph-probe", community / "graph-probe")
    async with running_services(data, plugin_dirs=(community,)) as group:
        yield group, community


async def test_removed_plugin_sits_out_and_the_story_goes_on(changing_services) -> None:
    group, community = changing_services
    async with open_channel(group.addrs["scheduler"]) as channel, group.channel_as("registry", "operator") as registry_channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(minimal_session(requested_plugins=["graph-probe"], approved_plugins=["graph-probe"]))).session
        assert "graph-probe" in session.active_plugins
        shutil.rmtree(community / "graph-probe")
        await registry_pb2_grpc.PluginRegistryStub(registry_channel).Reload(registry_pb2.ReloadRequest())
        request = scheduler_pb2.SubmitActionsRequest(session_id=session.id, actions=[resources_pb2.PlayerAction(text="I go on.")])
        turn = [event async for event in stub.SubmitActions(request)][-1].turn_completed
        assert turn.status == store_pb2.TURN_STATUS_COMMITTED
        assert [r.runtime_id for r in turn.runtime_results] == ["narrator"]
        still = (await stub.GetSession(scheduler_pb2.GetSessionRequest(session_id=session.id))).session
        assert "graph-probe" in still.active_plugins, "the session's chosen set is not rewritten"

"""A Covel package ported with only its code rewritten plays through the five services: `.js`
paths load the `.py` modules, and the entry, the function handler and the guard import the
package's lib/. A registry Reload reloads the hooks service's entry modules too."""

from __future__ import annotations

import asyncio
import json
import shutil
import time

import pytest
import pytest_asyncio

from covel.common.v1 import common_pb2
from covel.hooks.v1 import hooks_pb2, hooks_pb2_grpc
from covel.registry.v1 import registry_pb2, registry_pb2_grpc
from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2
from shared.grpc_client import open_channel
from shared.settings import REPO_ROOT
from tests.e2e.conftest import minimal_session, running_services

pytestmark = pytest.mark.asyncio(loop_scope="session")

PORTED = REPO_ROOT / "tests" / "registry" / "fixtures" / "ported" / "ported-story"


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def ported_services(tmp_path_factory):
    data = tmp_path_factory.mktemp("ported")
    community = data / "community"
    community.mkdir()
    shutil.copytree(PORTED, community / "ported-story")
    async with running_services(data, plugin_dirs=(community,)) as group:
        yield group, community


async def _play(stub, session_id: str, text: str):
    request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[resources_pb2.PlayerAction(text=text)])
    turn = [event async for event in stub.SubmitActions(request)][-1].turn_completed
    assert turn.status == store_pb2.TURN_STATUS_COMMITTED, turn
    return {result.runtime_id: result for result in turn.runtime_results}


async def test_handler_and_guard_import_the_packages_lib(ported_services) -> None:
    group, _ = ported_services
    async with open_channel(group.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(minimal_session(requested_plugins=["ported-story"], approved_plugins=["ported-story"]))).session
        assert "ported-story" in session.active_plugins
        ran = (await _play(stub, session.id, "I wait."))["ported-story/tally"]
        assert (ran.status, json.loads(ran.output_json)) == (resources_pb2.RUNTIME_STATUS_SUCCESS, {"said": "TALLY!"}), ran.reason
        skipped = (await _play(stub, session.id, "skip this one"))["ported-story/tally"]
        assert (skipped.status, json.loads(skipped.output_json)) == (resources_pb2.RUNTIME_STATUS_SKIPPED, {"said": "GUARDED!"}), skipped.reason


async def _hooks_tools(hooks, generation: int) -> list[str]:
    deadline = time.monotonic() + 15
    while True:
        reply = await hooks.ListTools(hooks_pb2.ListToolsRequest(plugin_ids=["ported-story"]), timeout=5)
        if reply.generation == generation:
            return sorted(tool.name for tool in reply.tools)
        assert time.monotonic() < deadline, f"hooks stayed at generation {reply.generation}, registry is at {generation}"
        await asyncio.sleep(0.05)


async def test_registry_reload_reloads_the_entry_in_the_hooks_service(ported_services) -> None:
    group, community = ported_services
    async with group.channel_as("registry", "operator") as registry_channel, group.channel_as("hooks", "scheduler") as hooks_channel:
        registry = registry_pb2_grpc.PluginRegistryStub(registry_channel)
        hooks = hooks_pb2_grpc.HookDispatcherStub(hooks_channel)
        before = (await registry.ListPlugins(registry_pb2.ListPluginsRequest(), timeout=5)).generation
        # A community plugin: its code loads once a session approved it (and then with every generation).
        await hooks.LoadApprovedPlugins(hooks_pb2.LoadApprovedPluginsRequest(plugin_ids=["ported-story"]), timeout=30)
        assert await _hooks_tools(hooks, before) == ["shout"]
        # The entry now registers `yell` while contributes still declares `shout`: after the reload the hooks
        # service, loading it again, unloads it and lists why. (The registry runs no community code: it lists
        # the package as loaded, with no entry diagnostic.)
        index = community / "ported-story" / "server" / "index.py"
        index.write_text(index.read_text().replace('register_tool("shout"', 'register_tool("yell"'))
        reloaded = (await registry.Reload(registry_pb2.ReloadRequest(), timeout=30)).generation
        package = (await registry.GetPlugin(registry_pb2.GetPluginRequest(plugin_id="ported-story"), timeout=5)).plugin
        assert package.state == registry_pb2.PLUGIN_STATE_LOADED
        assert [d.code for d in package.diagnostics if d.severity == common_pb2.SEVERITY_ERROR] == []
        assert await _hooks_tools(hooks, reloaded) == []
        subscriptions = await hooks.GetSubscriptions(hooks_pb2.GetSubscriptionsRequest(), timeout=5)
        [error] = [e for e in subscriptions.load_errors if e.plugin_id == "ported-story"]
        assert "yell" in error.message and "shout" in error.message

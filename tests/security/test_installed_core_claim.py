"""The attack of issue 18 item 3, through the five real services: InstallPackage of a community zip
that claims `kind: core`, with a function runtime that reads COVEL_API_TOKEN. It is installed as a
community plugin: a new session does not include it, and its code does not run until approved."""

from __future__ import annotations

import io
import zipfile

import pytest_asyncio

from covel.registry.v1 import registry_pb2, registry_pb2_grpc
from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from covel_cli.launcher import ServiceGroup, free_port_addrs
from shared.grpc_client import open_channel
from shared.settings import REPO_ROOT
from tests.e2e.conftest import minimal_session
from tests.security.warm_up import until_sessions_open

TOKEN = "operator-token-the-plugin-wants"
PLUGIN = "totally-core"
RUNTIME = f"{PLUGIN}/peek"
HANDLER = """
import os


async def handler(ctx):
    # What the attack did: read the scheduler's token; recorded, so a run cannot go unnoticed.
    await ctx.plugin_data.set("ran", "peek", {"saw_token": bool(os.environ.get("COVEL_API_TOKEN"))})
    return {}
"""


def attack_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(f"{PLUGIN}/PLUGIN.md", "---\nkind: core\nversion: 0.1.0\ndescription: Claims to be core.\n---\nHello.\n")
        archive.writestr(f"{PLUGIN}/runtimes/peek/RUNTIME.md", "---\nschedule:\n  stage: post-turn\nfunction: {}\n---\nPeeks.\n")
        archive.writestr(f"{PLUGIN}/runtimes/peek/handler.py", HANDLER)
    return buffer.getvalue()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def services(tmp_path_factory):
    folder = tmp_path_factory.mktemp("core-claim")
    env = {
        "COVEL_PLUGIN_DIRS": f"{REPO_ROOT / 'plugins'}:{folder / 'installed'}",
        "COVEL_API_TOKEN": TOKEN,
    }
    group = ServiceGroup(free_port_addrs(), folder / "data", extra_env=env)
    try:
        await group.start()
        await until_sessions_open(group.addrs["scheduler"], TOKEN)
        yield group
    finally:
        await group.stop()


async def turn_of(stub, session_id: str) -> store_pb2.Turn:
    request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[resources_pb2.PlayerAction(kind="do", text="I wait.")])
    events = [event async for event in stub.SubmitActions(request, timeout=60)]
    return next(event.turn_completed for event in events if event.WhichOneof("event") == "turn_completed")


async def ran(store, session_id: str) -> list[str]:
    request = store_pb2.ListPluginDataRequest(session_id=session_id, plugin_id=PLUGIN, namespace="ran")
    return [entry.key for entry in (await store.ListPluginData(request, timeout=10)).entries]


async def test_an_installed_zip_claiming_core_joins_no_session_and_runs_nothing_unapproved(services):
    group = services
    async with (group.channel_as("registry", "operator") as registry_channel, group.channel_as("store", "scheduler") as store_channel,
                open_channel(group.addrs["scheduler"], bearer_token=TOKEN) as channel):
        registry = registry_pb2_grpc.PluginRegistryStub(registry_channel)
        installed = await registry.InstallPackage(registry_pb2.InstallPackageRequest(zip=attack_zip()), timeout=30)
        assert installed.ok, [d.message for d in installed.diagnostics]
        assert "core-not-builtin" in [d.code for d in installed.diagnostics]
        plugin = (await registry.GetPlugin(registry_pb2.GetPluginRequest(plugin_id=PLUGIN), timeout=10)).plugin
        assert (plugin.source, plugin.kind) == ("community", "plugin")
        stub, store = scheduler_pb2_grpc.SchedulerStub(channel), store_pb2_grpc.TransactionalStoreStub(store_channel)

        # A new session, asking for nothing: every builtin core plugin joins, the pretender does not.
        everyday = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(), timeout=15)).session
        assert PLUGIN not in everyday.active_plugins and "narrator" in everyday.active_plugins
        minimal = (await stub.CreateSession(minimal_session(), timeout=15)).session
        turn = await turn_of(stub, minimal.id)
        assert turn.status == store_pb2.TURN_STATUS_COMMITTED
        assert RUNTIME not in [result.runtime_id for result in turn.runtime_results]
        assert await ran(store, minimal.id) == []

        # Asked for by name, it joins, and its code waits for the player's approval.
        asked = (await stub.CreateSession(minimal_session(requested_plugins=[PLUGIN]), timeout=15)).session
        turn = await turn_of(stub, asked.id)
        [result] = [result for result in turn.runtime_results if result.runtime_id == RUNTIME]
        assert (result.status, result.reason.split(":")[0]) == (resources_pb2.RUNTIME_STATUS_SKIPPED, "approval-required")
        assert await ran(store, asked.id) == []

        # The check can see a run: approved, the same code runs on the next turn.
        await stub.SetPluginApprovals(scheduler_pb2.SetPluginApprovalsRequest(session_id=asked.id, approve=[PLUGIN]), timeout=15)
        turn = await turn_of(stub, asked.id)
        [result] = [result for result in turn.runtime_results if result.runtime_id == RUNTIME]
        assert result.status == resources_pb2.RUNTIME_STATUS_SUCCESS, result.reason
        assert await ran(store, asked.id) == ["peek"]

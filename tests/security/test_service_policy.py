"""The attacks of issue 18 item 1, through the five real services `covel up` starts (its own dev PKI):
a caller without a certificate of the CA, or with another service's, gets nothing from the internal
services; the operator's certificate does what only an operator may (docs/security.md, Service identity)."""

from __future__ import annotations

import argparse
import io
import json
import os

import grpc
import pytest
import pytest_asyncio

from covel.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from covel.hooks.v1 import hooks_pb2, hooks_pb2_grpc
from covel.registry.v1 import registry_pb2, registry_pb2_grpc
from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from covel_cli import operator
from covel_cli.launcher import ServiceGroup, free_port_addrs
from shared.grpc_client import open_channel
from shared.settings import REPO_ROOT, SecuritySettings
from shared.structs import to_struct
from tests.conftest import SHIPPED_SANDBOX
from tests.store.helpers import story_proposal

STRANGERS = ("hooks", "gateway", "registry", "store", "operator")
# A tool that reports what a sandboxed plugin could use to call a service.
PROBE_CODE = '''
import os

def register(covel):
    def credentials(ctx, args):
        try:
            with open(args["key"], "rb"):
                readable = True
        except OSError:
            readable = False
        return {"env": sorted(name for name in os.environ if name.startswith("COVEL_")), "key_readable": readable}

    covel.register_tool("credentials", credentials, parameters={"type": "object", "properties": {"key": {"type": "string"}}})
'''
COMMUNITY_PACKAGE = "---\nversion: 0.1.0\ndescription: A package an operator installs.\n---\nHello.\n"


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def deployed(tmp_path_factory):
    """The five services as `covel up` runs them, the sandbox as it ships; one victim session with a turn."""
    plugins = tmp_path_factory.mktemp("probe-plugins")  # also where InstallPackage writes: a community folder
    (plugins / "credential-probe" / "server").mkdir(parents=True)
    (plugins / "credential-probe" / "PLUGIN.md").write_text("---\nversion: 0.1.0\ncontributes:\n  tools: [credentials]\n---\n")
    (plugins / "credential-probe" / "server" / "index.py").write_text(PROBE_CODE)
    env = {**SHIPPED_SANDBOX, "COVEL_PLUGIN_DIRS": os.pathsep.join(map(str, (REPO_ROOT / "plugins", plugins)))}
    group = ServiceGroup(free_port_addrs(), tmp_path_factory.mktemp("data"), extra_env=env)
    try:
        await group.start()
        async with open_channel(group.addrs["scheduler"]) as channel:
            client = scheduler_pb2_grpc.SchedulerStub(channel)
            victim = (await client.CreateSession(scheduler_pb2.CreateSessionRequest(), timeout=20)).session
            request = scheduler_pb2.SubmitActionsRequest(session_id=victim.id, actions=[resources_pb2.PlayerAction(kind="do", text="I knock.")])
            [_ async for _ in client.SubmitActions(request, timeout=60)]
        yield group, victim.id
    finally:
        await group.stop()


async def _refused(call) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await call
    return refused.value


def _store_attacks(session_id: str) -> dict[str, object]:
    """What a stranger tried on the store: read a victim's story and plugin data, take its lease,
    commit a story as narrator, claim the detached jobs."""
    return {
        "ListMessages": store_pb2.ListMessagesRequest(session_id=session_id),
        "ListPluginData": store_pb2.ListPluginDataRequest(session_id=session_id),
        "AcquireTurnLease": store_pb2.AcquireTurnLeaseRequest(session_id=session_id, holder="intruder", ttl_ms=60_000),
        "CommitTurn": store_pb2.CommitTurnRequest(session_id=session_id, lease_id="guessed", proposals=[
            story_proposal("The hero dies.", runtime_id="narrator/story", plugin_id="narrator")]),
        "ClaimDetachedJob": store_pb2.ClaimDetachedJobRequest(holder="intruder", lease_ttl_ms=60_000),
    }


async def test_without_a_certificate_of_the_ca_no_internal_service_answers(deployed):
    group, session_id = deployed
    no_certificate = SecuritySettings(tls_ca_file=group.pki.ca_cert)
    for name in ("store", "registry", "hooks", "gateway"):
        for security in (no_certificate, SecuritySettings()):  # TLS without a client certificate; plaintext
            async with open_channel(group.addrs[name], security=security) as channel:
                refused = await _refused(store_pb2_grpc.TransactionalStoreStub(channel).ListMessages(
                    store_pb2.ListMessagesRequest(session_id=session_id), timeout=5) if name == "store" else
                    registry_pb2_grpc.PluginRegistryStub(channel).Reload(registry_pb2.ReloadRequest(), timeout=5) if name == "registry" else
                    hooks_pb2_grpc.HookDispatcherStub(channel).Reload(hooks_pb2.ReloadRequest(), timeout=5) if name == "hooks" else
                    gateway_pb2_grpc.LlmGatewayStub(channel).ListSlots(gateway_pb2.ListSlotsRequest(), timeout=5))
            # The TLS handshake fails: the call never reaches a method.
            assert refused.code() == grpc.StatusCode.UNAVAILABLE, (name, refused.details())


async def test_the_store_serves_no_one_but_the_scheduler(deployed):
    group, session_id = deployed
    for stranger in STRANGERS:
        async with group.channel_as("store", stranger) as channel:
            stub = store_pb2_grpc.TransactionalStoreStub(channel)
            for method, request in _store_attacks(session_id).items():
                refused = await _refused(getattr(stub, method)(request, timeout=10))
                assert refused.code() == grpc.StatusCode.PERMISSION_DENIED, (stranger, method)
                assert refused.details() == (f"covel.store.v1.TransactionalStore/{method} may be called by scheduler only "
                                             f"(the turn runner's own calls); the caller is {stranger}")
    async with open_channel(group.addrs["scheduler"]) as channel:
        client = scheduler_pb2_grpc.SchedulerStub(channel)
        messages = (await client.ListMessages(scheduler_pb2.ListMessagesRequest(session_id=session_id), timeout=10)).messages
        # The victim's story is as its own turn left it (the player's line and the narrator's), and its next turn gets the lease.
        assert [message.role for message in messages] == [resources_pb2.MESSAGE_ROLE_PLAYER, resources_pb2.MESSAGE_ROLE_STORY]
        assert "The hero dies." not in messages[1].text
        request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[resources_pb2.PlayerAction(kind="do", text="I wait.")])
        [*_, last] = [event async for event in client.SubmitActions(request, timeout=60)]
    assert last.turn_completed.status == store_pb2.TURN_STATUS_COMMITTED


async def test_bad_dispatches_of_a_stranger_pause_no_plugin(deployed):
    group, session_id = deployed
    bad = hooks_pb2.DispatchRequest(event="TurnStart", payload=to_struct({"bogus": True}), context=hooks_pb2.HookContext(
        session_id=session_id, turn_id="t-x", active_plugin_ids=["narrator"], approved_plugin_ids=["narrator"]))
    for stranger in ("gateway", "registry", "operator"):
        async with group.channel_as("hooks", stranger) as channel:
            for _ in range(3):
                refused = await _refused(hooks_pb2_grpc.HookDispatcherStub(channel).Dispatch(bad, timeout=10))
                assert refused.code() == grpc.StatusCode.PERMISSION_DENIED
                assert refused.details().endswith(f"may be called by scheduler only (the turn runner's own calls); the caller is {stranger}")
    async with open_channel(group.addrs["scheduler"]) as channel:
        paused = await scheduler_pb2_grpc.SchedulerStub(channel).ListPausedPlugins(
            scheduler_pb2.ListPausedPluginsRequest(session_id=session_id), timeout=10)
    assert list(paused.plugins) == []


async def test_only_the_scheduler_spends_the_model_keys(deployed):
    group, _ = deployed
    request = gateway_pb2.GenerateRequest(slot="story", messages=[gateway_pb2.ChatMessage(role="user", content="Write me a novel.")])
    for stranger in STRANGERS:
        async with group.channel_as("gateway", stranger) as channel:
            stub = gateway_pb2_grpc.LlmGatewayStub(channel)
            once = await _refused(stub.GenerateOnce(request, timeout=10))
            streamed = await _refused(stub.Generate(request, timeout=10).read())
        for refused in (once, streamed):
            assert refused.code() == grpc.StatusCode.PERMISSION_DENIED
            assert "(spends the operator's model keys: turns only); the caller is " + stranger in refused.details()


async def test_install_and_reload_need_the_operator(deployed, tmp_path):
    group, _ = deployed
    package = tmp_path / "community-hello"
    package.mkdir(parents=True)
    (package / "PLUGIN.md").write_text(COMMUNITY_PACKAGE)
    install = registry_pb2.InstallPackageRequest(zip=operator.zipped(package))
    for stranger in ("scheduler", "hooks", "gateway", "store"):
        async with group.channel_as("registry", stranger) as registry_channel, group.channel_as("hooks", stranger) as hooks_channel:
            registry = registry_pb2_grpc.PluginRegistryStub(registry_channel)
            for call in (registry.InstallPackage(install, timeout=30), registry.Reload(registry_pb2.ReloadRequest(), timeout=30),
                         registry.ValidatePackage(registry_pb2.ValidatePackageRequest(zip=install.zip), timeout=30),
                         hooks_pb2_grpc.HookDispatcherStub(hooks_channel).Reload(hooks_pb2.ReloadRequest(), timeout=30)):
                refused = await _refused(call)
                assert refused.code() == grpc.StatusCode.PERMISSION_DENIED, stranger
                assert "may be called by operator only (" in refused.details(), refused.details()
                assert refused.details().endswith(f"the caller is {stranger}")
    async with group.channel_as("registry", "operator") as channel:
        catalogue = await registry_pb2_grpc.PluginRegistryStub(channel).ListPlugins(registry_pb2.ListPluginsRequest(), timeout=10)
    assert "community-hello" not in [plugin.id for plugin in catalogue.plugins]
    # The operator's commands, with the certificate `covel up` made (found through COVEL_DATA_DIR).
    out, err = io.StringIO(), io.StringIO()
    environ = {"COVEL_DATA_DIR": str(group.data_dir), "COVEL_REGISTRY_ADDR": group.addrs["registry"]}
    with pytest.MonkeyPatch.context() as patch:
        for name, value in environ.items():
            patch.setenv(name, value)
        for name in ("COVEL_TLS_CERT_FILE", "COVEL_TLS_KEY_FILE", "COVEL_TLS_CA_FILE"):
            patch.delenv(name, raising=False)
        installed = await operator.install(argparse.Namespace(package=str(package), replace=False, addr=None), out, err)
        reloaded = await operator.reload(argparse.Namespace(addr=None), out, err)
    assert (installed, reloaded) == (0, 0), err.getvalue()
    assert "installed community-hello into " in out.getvalue() and "reloaded: " in out.getvalue()
    async with group.channel_as("registry", "operator") as channel:
        plugin = (await registry_pb2_grpc.PluginRegistryStub(channel).GetPlugin(
            registry_pb2.GetPluginRequest(plugin_id="community-hello"), timeout=10)).plugin
    assert plugin.id == "community-hello"


async def test_plugin_code_in_a_sandbox_worker_holds_no_credential(deployed):
    group, session_id = deployed
    key = group.pki.files("hooks").key
    context = hooks_pb2.HookContext(session_id=session_id, turn_id="t-probe", active_plugin_ids=["credential-probe"],
                                    approved_plugin_ids=["credential-probe"])
    async with group.channel_as("hooks", "scheduler") as channel:
        reply = await hooks_pb2_grpc.HookDispatcherStub(channel).CallTool(hooks_pb2.CallToolRequest(
            context=context, plugin_id="credential-probe", name="credentials", arguments=f'{{"key": "{key}"}}'), timeout=30)
    # No COVEL_TLS_* (nor any COVEL_*) variable, and the service's key file out of reach.
    assert json.loads(reply.result) == {"ok": True, "data": {"env": [], "key_readable": False}}

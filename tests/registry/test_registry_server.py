"""The registry over a real gRPC channel, started in the test's event loop."""

from __future__ import annotations

import shutil
from pathlib import Path

import grpc
import pytest

from covel.common.v1 import common_pb2
from covel.registry.v1 import registry_pb2
from shared.errors import field_violations
from shared.settings import default_plugin_dirs
from shared.structs import from_struct
from tests.registry.conftest import FIXTURES, write_plugin


async def test_list_plugins_serves_the_builtin_narrator(registry_for) -> None:
    client = await registry_for(default_plugin_dirs())
    reply = await client.stub.ListPlugins(registry_pb2.ListPluginsRequest(), timeout=5)
    assert reply.generation == 1
    narrator = next(plugin for plugin in reply.plugins if plugin.id == "narrator")
    assert narrator.state == registry_pb2.PLUGIN_STATE_LOADED
    assert narrator.kind == "core" and narrator.source == "builtin"
    assert list(narrator.provides) == ["narrative-engine@2"]
    assert narrator.root_dir == str((default_plugin_dirs()[0] / "narrator").resolve())
    [runtime] = narrator.runtimes
    assert (runtime.runtime_id, runtime.type, runtime.stage, runtime.visibility) == ("narrator", "agent", "narrative", "story")
    assert "zh" in runtime.prompt_variants
    manifest = from_struct(runtime.manifest)
    assert manifest["agent"]["model"] == "story"
    assert manifest["agent"]["loop"]["timeoutMs"] == 240000
    assert from_struct(narrator.definition)["id"] == "narrator"


async def test_failed_packages_are_listed_with_diagnostics(registry_for, tmp_path: Path) -> None:
    shutil.copytree(FIXTURES / "unknown-hook" / "unknown-hook", tmp_path / "unknown-hook")
    shutil.copytree(FIXTURES / "good" / "facts", tmp_path / "facts")
    client = await registry_for([tmp_path])
    reply = await client.stub.ListPlugins(registry_pb2.ListPluginsRequest(), timeout=5)
    by_id = {plugin.id: plugin for plugin in reply.plugins}
    assert [plugin.id for plugin in reply.plugins] == ["facts", "unknown-hook"]
    broken = by_id["unknown-hook"]
    assert broken.state == registry_pb2.PLUGIN_STATE_FAILED and broken.source == "community"
    [diagnostic] = broken.diagnostics
    assert diagnostic.severity == common_pb2.SEVERITY_ERROR
    assert (diagnostic.code, diagnostic.file, diagnostic.field_path, diagnostic.plugin_id) == (
        "unknown-hook-event",
        "PLUGIN.md",
        "contributes.hooks[1]",
        "unknown-hook",
    )
    facts = by_id["facts"]
    assert [(hook.event, hook.enforce) for hook in facts.hooks] == [("PreToolUse", "normal"), ("TurnStart", "pre")]
    assert facts.entry == "server/index.py"
    assert list(facts.default_provides) == ["facts.lookup@1"]


async def test_get_plugin_and_not_found(registry_for, tmp_path: Path) -> None:
    write_plugin(tmp_path, "alpha", "kind: plugin")
    client = await registry_for([tmp_path])
    reply = await client.stub.GetPlugin(registry_pb2.GetPluginRequest(plugin_id="alpha"), timeout=5)
    assert reply.plugin.id == "alpha" and reply.generation == 1
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await client.stub.GetPlugin(registry_pb2.GetPluginRequest(plugin_id="ghost"), timeout=5)
    assert raised.value.code() == grpc.StatusCode.NOT_FOUND
    # The id, but not the host's plugin folders (issue 18: no host paths in client-visible messages).
    assert "ghost" in raised.value.details() and str(tmp_path) not in raised.value.details()
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await client.stub.GetPlugin(registry_pb2.GetPluginRequest(plugin_id=""), timeout=5)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert [v.field for v in field_violations(raised.value)] == ["plugin_id"]


async def test_get_plugins(registry_for, tmp_path: Path) -> None:
    write_plugin(tmp_path, "alpha", "kind: plugin")
    write_plugin(tmp_path, "beta", "kind: plugin")
    client = await registry_for([tmp_path])
    reply = await client.stub.GetPlugins(registry_pb2.GetPluginsRequest(plugin_ids=["beta", "alpha", "beta"]), timeout=5)
    assert [plugin.id for plugin in reply.plugins] == ["beta", "alpha"]
    empty = await client.stub.GetPlugins(registry_pb2.GetPluginsRequest(), timeout=5)
    assert list(empty.plugins) == [] and empty.generation == 1
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await client.stub.GetPlugins(registry_pb2.GetPluginsRequest(plugin_ids=["alpha", "gamma"]), timeout=5)
    assert raised.value.code() == grpc.StatusCode.NOT_FOUND and "gamma" in raised.value.details()


async def test_resolve_session_plugins(registry_for, tmp_path: Path) -> None:
    write_plugin(tmp_path, "core1", "kind: core")
    write_plugin(tmp_path, "consumer", "requires: [facts@1]")
    write_plugin(tmp_path, "provider", "provides: [facts@1]")
    write_plugin(tmp_path, "needy", "requires: [nothing@1]")
    client = await registry_for([tmp_path], builtin_dirs=[tmp_path])
    reply = await client.stub.ResolveSessionPlugins(
        registry_pb2.ResolveSessionPluginsRequest(requested=["consumer", "needy", "ghost"]), timeout=5
    )
    assert list(reply.active) == ["consumer", "core1", "provider"]
    assert list(reply.auto_added) == ["provider"]
    assert {(r.plugin_id, r.code, r.contract) for r in reply.rejected} == {
        ("needy", "missing-provider", "nothing@1"),
        ("ghost", "not-found", ""),
    }
    assert reply.generation == 1


async def test_resolve_rejects_malformed_ids(registry_for, tmp_path: Path) -> None:
    client = await registry_for([tmp_path])
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await client.stub.ResolveSessionPlugins(
            registry_pb2.ResolveSessionPluginsRequest(requested=["fine", "Not An Id"]), timeout=5
        )
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert [v.field for v in field_violations(raised.value)] == ["requested[1]"]


async def test_reload_bumps_generation_and_sees_new_packages(registry_for, tmp_path: Path) -> None:
    client = await registry_for([tmp_path])
    first = await client.stub.ListPlugins(registry_pb2.ListPluginsRequest(), timeout=5)
    assert first.generation == 1 and list(first.plugins) == []
    write_plugin(tmp_path, "late", "kind: plugin")
    reloaded = await client.stub.Reload(registry_pb2.ReloadRequest(), timeout=5)
    assert (reloaded.generation, reloaded.plugin_count) == (2, 1)
    after = await client.stub.ListPlugins(registry_pb2.ListPluginsRequest(), timeout=5)
    assert after.generation == 2 and [plugin.id for plugin in after.plugins] == ["late"]


async def test_health_and_missing_plugin_dir(registry_for, tmp_path: Path) -> None:
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    client = await registry_for([tmp_path / "does-not-exist", tmp_path])
    health = health_pb2_grpc.HealthStub(client.channel)
    reply = await health.Check(health_pb2.HealthCheckRequest(service="covel.registry.v1.PluginRegistry"), timeout=5)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING

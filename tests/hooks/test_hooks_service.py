"""The hook dispatcher over gRPC, loading entry modules from a real registry."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
import pytest_asyncio

from covel.hooks.v1 import hooks_pb2, hooks_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from services.hooks.server import start as start_hooks
from services.hooks.settings import HooksSettings
from services.registry.server import start as start_registry
from services.registry.settings import RegistrySettings
from services.store.server import start as start_store
from services.store.settings import StoreSettings
from shared.errors import field_violations
from shared.structs import from_struct, to_struct
from tests.conftest import free_addr
from tests.support.identities import PolicyRoutedStub, bare_channel_as, service_tls

pytestmark = pytest.mark.asyncio(loop_scope="session")

GUARD_PLUGIN = '''---
contributes:
  hooks: [TurnStart, PreLLMCall]
---
'''
GUARD_CODE = '''
import asyncio

def register(covel):
    covel.on("TurnStart", guard, timeout_ms=100)
    covel.on("PreLLMCall", lambda ctx, p: {"replace": {"model": "fast:" + ctx.get_own_settings().get("tier", "none")}})

async def guard(ctx, payload):
    text = payload["playerMessage"]
    if text == "sleep":
        await asyncio.sleep(5)
    if text == "raise":
        raise ValueError("bad rule")
    if text == "garbage":
        return 42
    if text == "no":
        return {"action": "abort", "reason": "guard says no"}
'''
MISMATCHED = '''---
contributes:
  hooks: [TurnStop]
---
'''


def write(root: Path, plugin_id: str, manifest: str, code: str | None) -> None:
    (root / plugin_id).mkdir(parents=True)
    (root / plugin_id / "PLUGIN.md").write_text(manifest)
    if code is not None:
        (root / plugin_id / "server").mkdir()
        (root / plugin_id / "server" / "index.py").write_text(code)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def services(tmp_path_factory):
    """Registry, store (the fault breaker's counts) and hooks; a hooks stub as its callers, a store stub as the scheduler."""
    plugins = tmp_path_factory.mktemp("plugins")
    write(plugins, "guard", GUARD_PLUGIN, GUARD_CODE)
    write(plugins, "mismatched", MISMATCHED, "def register(covel):\n    covel.on('TurnStart', lambda c, p: None)\n")
    registry_addr, hooks_addr, store_addr = free_addr(), free_addr(), free_addr()
    registry = await start_registry(RegistrySettings(registry_addr=registry_addr, plugin_dirs=[plugins], **service_tls("registry")))
    store = await start_store(StoreSettings(data_dir=tmp_path_factory.mktemp("store"), store_addr=store_addr, **service_tls("store")))
    hooks = await start_hooks(HooksSettings(registry_addr=registry_addr, hooks_addr=hooks_addr, store_addr=store_addr,
                                            hooks_fault_threshold=3, **service_tls("hooks")))
    # Each method as a caller the policy admits for it: the scheduler, or the operator (Reload).
    stub = PolicyRoutedStub(hooks_addr, hooks_pb2_grpc.HookDispatcherStub, "covel.hooks.v1.HookDispatcher", bare=False)
    store_channel = bare_channel_as(store_addr, "scheduler")
    yield stub, store_pb2_grpc.TransactionalStoreStub(store_channel)
    await stub.close()
    await store_channel.close()
    await hooks.stop(0)
    await store.stop(0)
    await registry.stop(0)


@pytest.fixture
def hooks_stub(services):
    return services[0]


def turn_start(session: str, text: str, turn: str = "t1") -> hooks_pb2.DispatchRequest:
    return hooks_pb2.DispatchRequest(
        event="TurnStart",
        context=hooks_pb2.HookContext(session_id=session, turn_id=turn, active_plugin_ids=["guard", "mismatched"],
                                      approved_plugin_ids=["guard", "mismatched"]),
        payload=to_struct({"playerMessage": text, "actions": [], "activeRuntimes": []}),
    )


async def test_subscriptions_and_load_errors(hooks_stub) -> None:
    # Community plugins: their entry modules load once a session approved them.
    approved = await hooks_stub.LoadApprovedPlugins(hooks_pb2.LoadApprovedPluginsRequest(plugin_ids=["guard", "mismatched"]))
    assert list(approved.loaded) == ["guard"] and [e.plugin_id for e in approved.load_errors] == ["mismatched"]
    reply = await hooks_stub.GetSubscriptions(hooks_pb2.GetSubscriptionsRequest())
    assert {s.event: list(s.plugin_ids) for s in reply.subscriptions} == {"TurnStart": ["guard"], "PreLLMCall": ["guard"]}
    [error] = reply.load_errors
    assert error.plugin_id == "mismatched" and "TurnStop" in error.message and "TurnStart" in error.message
    assert reply.generation >= 1


@pytest.mark.parametrize(
    ("text", "status", "reason_part"),
    [("sleep", "timeout", "100 ms"), ("raise", "error", "bad rule"), ("garbage", "invalid-result", "int"), ("no", "abort", "guard says no")],
)
async def test_guard_failures_block_the_turn(hooks_stub, text, status, reason_part) -> None:
    reply = await hooks_stub.Dispatch(turn_start(f"session-{text}", text))
    assert reply.outcome == hooks_pb2.OUTCOME_ABORT
    assert reason_part in reply.reason
    assert [(t.handler_plugin_id, t.status) for t in reply.trace] == [("guard", status)]


async def test_continue_and_settings_per_session(hooks_stub) -> None:
    reply = await hooks_stub.Dispatch(turn_start("ok-session", "hello"))
    assert reply.outcome == hooks_pb2.OUTCOME_CONTINUE
    for tier in ("gold", "free"):
        reply = await hooks_stub.Dispatch(
            hooks_pb2.DispatchRequest(
                event="PreLLMCall",
                context=hooks_pb2.HookContext(session_id=f"s-{tier}", turn_id="t", active_plugin_ids=["guard"],
                                              approved_plugin_ids=["guard"], plugin_settings={"guard": to_struct({"tier": tier})}),
                payload=to_struct({"model": "story", "messages": []}),
            )
        )
        assert from_struct(reply.payload)["model"] == f"fast:{tier}"


async def test_repeated_faults_pause_the_plugin_in_the_store_until_reset(services) -> None:
    hooks_stub, store = services
    session = (await store.CreateSession(store_pb2.CreateSessionRequest(session=store_pb2.Session(locale="en")))).session
    for turn in ("t1", "t2", "t3"):
        await hooks_stub.Dispatch(turn_start(session.id, "raise", turn))
    paused = await hooks_stub.ListPausedPlugins(hooks_pb2.ListPausedPluginsRequest(session_id=session.id))
    assert [p.plugin_id for p in paused.plugins] == ["guard"] and "3 hook faults" in paused.plugins[0].reason
    # The store holds it for every replica; the scheduler names it in the next turn's context.
    stored = (await store.GetSession(store_pb2.GetSessionRequest(session_id=session.id))).session
    assert [(p.plugin_id, p.turn_id) for p in stored.paused_plugins] == [("guard", "t3")]
    next_turn = turn_start(session.id, "raise", "t4")
    next_turn.context.paused_plugin_ids.extend(p.plugin_id for p in stored.paused_plugins)
    reply = await hooks_stub.Dispatch(next_turn)
    assert reply.outcome == hooks_pb2.OUTCOME_CONTINUE and list(reply.trace) == []
    reset = await hooks_stub.ResetPluginFaults(hooks_pb2.ResetPluginFaultsRequest(session_id=session.id, plugin_id="guard"))
    assert reset.was_paused
    assert list((await store.GetSession(store_pb2.GetSessionRequest(session_id=session.id))).session.paused_plugins) == []
    reply = await hooks_stub.Dispatch(turn_start(session.id, "raise", "t5"))
    assert reply.outcome == hooks_pb2.OUTCOME_ABORT


async def test_bad_requests_name_the_field(hooks_stub) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await hooks_stub.Dispatch(hooks_pb2.DispatchRequest(event="TurnBegin", context=hooks_pb2.HookContext(session_id="s")))
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert [v.field for v in field_violations(raised.value)] == ["event"]


async def test_concurrent_sessions_keep_their_own_settings_and_active_sets(hooks_stub) -> None:
    import asyncio

    async def call(index: int):
        active = ["guard"] if index % 3 else []
        reply = await hooks_stub.Dispatch(
            hooks_pb2.DispatchRequest(
                event="PreLLMCall",
                context=hooks_pb2.HookContext(
                    session_id=f"concurrent-{index}", turn_id="t", active_plugin_ids=active, approved_plugin_ids=active,
                    plugin_settings={"guard": to_struct({"tier": f"tier-{index}"})},
                ),
                payload=to_struct({"model": "story", "messages": []}),
            )
        )
        return index, from_struct(reply.payload)["model"]

    results = await asyncio.gather(*(call(index) for index in range(30)))
    for index, model in results:
        assert model == (f"fast:tier-{index}" if index % 3 else "story")

"""Gateway event keys in the hooks service: exact and family subscriptions, unknown and custom
keys, the session audience, awaited handlers' timeouts, bounded waits that never cancel, and
the shutdown join. A real registry and hooks server; the plugin's handlers are real code."""

from __future__ import annotations

import asyncio
import io
import time
from pathlib import Path

import grpc
import pytest
import pytest_asyncio

from covel.hooks.v1 import hooks_pb2, hooks_pb2_grpc
from covel_cli.hooks_info import render
from services.hooks.server import start as start_hooks
from services.hooks.settings import HooksSettings
from services.registry.server import start as start_registry
from services.registry.settings import RegistrySettings
from services.scheduler.hooks.event_keys import SchedulerEventKeys
from shared.errors import field_violations
from shared.plugin_sdk.event_keys import EVENT_KEYS, FAMILIES, Delivery, matches, subscription_warning
from shared.plugin_sdk.registrar import PluginRegistrar, RegistrationError
from shared.sandbox import SandboxSettings
from shared.settings import REPO_ROOT
from shared.structs import from_struct, to_struct
from tests.conftest import free_addr
from tests.support.identities import channel_as, service_tls

pytestmark = pytest.mark.asyncio(loop_scope="session")

KEYS_CODE = '''
import asyncio
import time
from pathlib import Path


def register(covel):
    covel.on_event("command", family)
    covel.on_event("command:new", exact)
    covel.on_event("session:compact", not_a_family)
    covel.on_event("command:nwe", typo)
    covel.on_event("acme:thing", custom)
    covel.on_event("gateway:shutdown", slow, timeout_ms=60000)
    covel.on_event("agent:bootstrap", add_file)
    covel.on_event("agent:bootstrap", sees_the_added_file)
    covel.on_event("message:received", slow_with_timeout, timeout_ms=200)
    covel.on_event("message:received", after_the_slow_one)
    covel.on_event("session:patch", raises)
    covel.on_event("session:patch", after_the_raise)
    covel.on_event("message:sent", leaves_garbage)


def seen(event, name):
    event.context.setdefault("seen", []).append(name)


def family(event):
    seen(event, f"family:{event.type}:{event.action}")


def exact(event):
    seen(event, "exact")


def not_a_family(event):
    seen(event, "session:compact")


def typo(event):
    seen(event, "typo")


def custom(event):
    seen(event, f"custom:{event.session_key}")


async def slow(event):
    await asyncio.sleep(event.context["sleep"])
    Path(event.context["marker"]).write_text(repr(time.monotonic()))


def add_file(event):
    event.context["bootstrapFiles"].append({"name": "EXTRA.md", "path": "/x/EXTRA.md", "missing": False, "content": "extra"})


def sees_the_added_file(event):
    seen(event, [record["name"] for record in event.context["bootstrapFiles"]])


async def slow_with_timeout(event):
    await asyncio.sleep(0.8)
    Path(event.context["marker"]).write_text(repr(time.monotonic()))


def after_the_slow_one(event):
    seen(event, "after-slow")


def raises(event):
    raise RuntimeError("boom")


def after_the_raise(event):
    seen(event, "after-raise")


def leaves_garbage(event):
    event.context["bad"] = object()
'''


def write(root: Path, plugin_id: str, code: str) -> None:
    (root / plugin_id / "server").mkdir(parents=True)
    (root / plugin_id / "PLUGIN.md").write_text("---\nversion: 0.1.0\n---\n")
    (root / plugin_id / "server" / "index.py").write_text(code)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def servers(tmp_path_factory):
    plugins = tmp_path_factory.mktemp("plugins")
    write(plugins, "keys", KEYS_CODE)
    registry_addr, hooks_addr = free_addr(), free_addr()
    registry = await start_registry(RegistrySettings(registry_addr=registry_addr, plugin_dirs=[plugins], **service_tls("registry")))
    # The handlers report through files in tmp_path: their sandbox workers keep /tmp and the service's uid.
    hooks = await start_hooks(HooksSettings(registry_addr=registry_addr, hooks_addr=hooks_addr, **service_tls("hooks")),
                              SandboxSettings(sandbox_hide_dirs=False, sandbox_drop_privileges=False))
    channel = channel_as(hooks_addr, "scheduler")
    yield hooks_pb2_grpc.HookDispatcherStub(channel), registry_addr
    await channel.close()
    await hooks.stop(0)
    await registry.stop(0)


@pytest.fixture
def stub(servers) -> hooks_pb2_grpc.HookDispatcherStub:
    return servers[0]


def session(active=("keys",), approved=("keys",)) -> hooks_pb2.HookContext:
    return hooks_pb2.HookContext(session_id="s1", active_plugin_ids=list(active), approved_plugin_ids=list(approved))


async def emit(stub, key: str, context: dict | None = None, *, in_session: hooks_pb2.HookContext | None = None,
               budget_ms: int = 0) -> hooks_pb2.EmitEventResponse:
    request = hooks_pb2.EmitEventRequest(key=key, context=to_struct(context or {}), wait_budget_ms=budget_ms)
    if in_session is not None:
        request.session.CopyFrom(in_session)
    return await stub.EmitEvent(request, timeout=30)


async def test_family_subscribers_run_before_exact_ones_and_families_get_every_key(stub) -> None:
    new = await emit(stub, "command:new", in_session=session())
    assert from_struct(new.context)["seen"] == ["family:command:new", "exact"]
    reset = await emit(stub, "command:reset", in_session=session())
    assert from_struct(reset.context)["seen"] == ["family:command:reset"]
    assert [entry.event for entry in new.trace] == ["command:new", "command:new"] and new.handler_count == 2


async def test_session_compact_is_not_a_family_and_unknown_keys_never_fire_from_kernel_keys(stub) -> None:
    for key in ("session:compact:before", "session:compact:after"):
        reply = await emit(stub, key, in_session=session())
        assert reply.handler_count == 0 and "seen" not in from_struct(reply.context)
    # command:nwe is only reached when code emits exactly that key.
    typo = await emit(stub, "command:nwe", in_session=session())
    assert from_struct(typo.context)["seen"] == ["family:command:nwe", "typo"]


async def test_custom_keys_fire_only_when_emitted(stub) -> None:
    reply = await emit(stub, "acme:thing", in_session=session())
    assert from_struct(reply.context)["seen"] == ["custom:s1"]
    sessionless = await emit(stub, "acme:thing")
    assert from_struct(sessionless.context)["seen"] == ["custom:None"]


async def test_info_lists_keys_and_unknown_subscriptions_with_warnings(stub) -> None:
    info = await stub.ListEventKeys(hooks_pb2.ListEventKeysRequest(), timeout=5)
    assert [key.key for key in info.keys] == [key.key for key in EVENT_KEYS] and len(info.keys) == 15
    by_key = {key.key: key for key in info.keys}
    assert (by_key["gateway:shutdown"].delivery, by_key["gateway:shutdown"].budget_ms) == ("bounded", 5000)
    assert (by_key["gateway:pre-restart"].delivery, by_key["gateway:pre-restart"].budget_ms) == ("bounded", 10000)
    assert by_key["message:received"].delivery == "observed" and by_key["command:new"].delivery == "awaited"
    subscriptions = {sub.key: sub for sub in info.subscriptions}
    assert subscriptions["command"].kind == "family" and subscriptions["command:new"].kind == "key"
    assert subscriptions["session:compact"].kind == "unknown"
    assert "not a family" in subscriptions["session:compact"].warning
    assert subscriptions["command:nwe"].kind == "unknown" and "command:new" in subscriptions["command:nwe"].warning
    assert "custom key" in subscriptions["acme:thing"].warning
    assert subscriptions["command:new"].warning == ""


async def test_session_events_reach_only_active_and_approved_plugins(stub) -> None:
    assert (await emit(stub, "command:new", in_session=session(active=("other",)))).handler_count == 0
    # Test plugins are community plugins: their code runs in a session only once approved there.
    assert (await emit(stub, "command:new", in_session=session(approved=()))).handler_count == 0
    assert (await emit(stub, "command:new", in_session=session())).handler_count == 2


async def test_handlers_share_a_mutable_context_that_returns_to_the_producer(stub) -> None:
    files = [{"name": "PLUGIN.md", "path": "/p/PLUGIN.md", "missing": False, "content": "prompt"}]
    reply = await emit(stub, "agent:bootstrap", {"workspaceDir": "/p", "bootstrapFiles": files}, in_session=session())
    context = from_struct(reply.context)
    assert [record["name"] for record in context["bootstrapFiles"]] == ["PLUGIN.md", "EXTRA.md"]
    assert context["seen"] == [["PLUGIN.md", "EXTRA.md"]]


async def test_a_handler_past_its_timeout_is_not_cancelled_and_the_next_one_runs(stub, tmp_path) -> None:
    marker = tmp_path / "slow-done"
    started = time.monotonic()
    reply = await emit(stub, "message:received", {"marker": str(marker)}, in_session=session())
    waited = time.monotonic() - started
    assert [entry.status for entry in reply.trace] == ["timeout", "ok"]
    assert from_struct(reply.context)["seen"] == ["after-slow"]
    assert 0.2 <= waited < 0.7, waited
    assert not marker.exists()
    await asyncio.sleep(0.9)
    assert marker.exists(), "the handler went on after its timeout"


async def test_a_raising_handler_is_recorded_and_skipped(stub) -> None:
    reply = await emit(stub, "session:patch", in_session=session())
    assert [entry.status for entry in reply.trace] == ["error", "ok"]
    assert "RuntimeError: boom" in reply.trace[0].message
    assert from_struct(reply.context)["seen"] == ["after-raise"]


async def test_a_context_left_as_non_json_is_undone(stub) -> None:
    reply = await emit(stub, "message:sent", {"to": "s1", "content": "x", "success": True, "channelId": "grpc"}, in_session=session())
    assert [entry.status for entry in reply.trace] == ["invalid-context"]
    assert from_struct(reply.context) == {"to": "s1", "content": "x", "success": True, "channelId": "grpc"}


async def test_a_bounded_wait_returns_at_its_budget_and_never_cancels_the_handler(stub, tmp_path) -> None:
    marker = tmp_path / "shutdown-done"
    started = time.monotonic()
    reply = await emit(stub, "gateway:shutdown", {"reason": "shutdown", "restartExpectedMs": None, "sleep": 1.0,
                                                  "marker": str(marker)}, budget_ms=300)
    waited = time.monotonic() - started
    assert not reply.completed and reply.handler_count == 1
    assert 0.3 <= waited < 0.6, waited
    await asyncio.sleep(1.0)
    finished = float(marker.read_text())
    assert finished - started >= 1.0, "the handler ran to its end after the budget"
    quick = await emit(stub, "gateway:shutdown", {"sleep": 0.05, "marker": str(tmp_path / "quick")}, budget_ms=300)
    assert quick.completed and [entry.status for entry in quick.trace] == ["ok"]


async def test_shutdown_joins_handlers_still_running(servers, tmp_path) -> None:
    registry_addr = servers[1]
    hooks_addr = free_addr()
    # The handlers report through files in tmp_path: their sandbox workers keep /tmp and the service's uid.
    hooks = await start_hooks(HooksSettings(registry_addr=registry_addr, hooks_addr=hooks_addr, **service_tls("hooks")),
                              SandboxSettings(sandbox_hide_dirs=False, sandbox_drop_privileges=False))
    marker = tmp_path / "joined"
    async with channel_as(hooks_addr, "scheduler") as channel:
        fresh = hooks_pb2_grpc.HookDispatcherStub(channel)
        # A community plugin: its code loads once a session approved it.
        await fresh.LoadApprovedPlugins(hooks_pb2.LoadApprovedPluginsRequest(plugin_ids=["keys"]))
        reply = await emit(fresh, "gateway:shutdown", {"sleep": 0.6, "marker": str(marker)}, budget_ms=50)
    assert not reply.completed
    started = time.monotonic()
    await hooks.stop(0)
    assert marker.exists() and time.monotonic() - started >= 0.4


async def test_bad_keys_and_budgets_are_invalid_arguments(stub) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await emit(stub, "Not A Key")
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT and ["key"] == [v.field for v in field_violations(raised.value)]
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await emit(stub, "command:new", budget_ms=-1)
    assert [v.field for v in field_violations(raised.value)] == ["wait_budget_ms"]
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await emit(stub, "command:new", in_session=hooks_pb2.HookContext())
    assert [v.field for v in field_violations(raised.value)] == ["session.session_id"]


async def test_registrar_on_event_checks_its_arguments_and_keeps_warnings() -> None:
    covel = PluginRegistrar("p")
    covel.on_event("command:nwe", lambda event: None)
    covel.on_event("message", lambda event: None)
    assert covel.event_handlers[0].warning and "command:new" in covel.event_handlers[0].warning
    assert covel.event_handlers[1].warning is None
    for key in ("", "Command:New", "a b", 3):
        with pytest.raises(RegistrationError):
            covel.on_event(key, lambda event: None)
    with pytest.raises(RegistrationError, match="not callable"):
        covel.on_event("command:new", "nope")
    with pytest.raises(RegistrationError, match="milliseconds"):
        covel.on_event("command:new", lambda event: None, timeout_ms=0)


async def test_the_table_follows_the_spec() -> None:
    assert FAMILIES == ("command", "session", "agent", "gateway", "message")
    deliveries = {key.key: key.delivery for key in EVENT_KEYS}
    awaited = {"command:new", "command:reset", "command:stop", "session:compact:before", "session:compact:after", "agent:bootstrap"}
    assert {key for key, delivery in deliveries.items() if delivery is Delivery.AWAITED} == awaited
    assert {key for key, delivery in deliveries.items() if delivery is Delivery.BOUNDED} == {"gateway:shutdown", "gateway:pre-restart"}
    assert matches("session", "session:compact:before") and not matches("session:compact", "session:compact:before")
    assert subscription_warning("gateway") is None and subscription_warning("gateway:startup") is None
    for refused in ("session:auto-reset", "message:transcribed"):
        assert "this kernel refuses" in (subscription_warning(refused) or ""), refused


async def test_the_docs_page_lists_every_key_with_its_delivery() -> None:
    page = (REPO_ROOT / "docs" / "event-hooks.md").read_text()
    rows = {line.split("|")[1].strip().strip("`"): line.split("|")[2].strip() for line in page.splitlines()
            if line.startswith("| `") and ":" in line.split("|")[1]}
    assert rows == {key.key: key.delivery.value for key in EVENT_KEYS}
    produced = {key.key for key in EVENT_KEYS if key.fired_at}
    assert {key for key in rows if "not produced" not in page.split(f"| `{key}` |")[1].split("\n")[0]} == produced


class SlowRefresh:
    """The hooks stub, with a subscription refresh (ListEventKeys) that takes `delay` seconds."""

    def __init__(self, stub, delay: float) -> None:
        self._stub = stub
        self._delay = delay

    async def ListEventKeys(self, request, **kwargs):
        await asyncio.sleep(self._delay)
        return await self._stub.ListEventKeys(request, **kwargs)

    def __getattr__(self, name):
        return getattr(self._stub, name)


async def test_a_bounded_wait_includes_the_subscription_refresh(stub, tmp_path) -> None:
    """One deadline for the whole wait: a 0.6 s refresh leaves 0.4 s of a 1 s budget to the handlers."""
    events = SchedulerEventKeys(SlowRefresh(stub, 0.6), None, {})
    started = time.monotonic()
    reply = await events.emit("gateway:shutdown", {"reason": "shutdown", "restartExpectedMs": None, "sleep": 2.0,
                                                   "marker": str(tmp_path / "late")}, budget_ms=1000)
    waited = time.monotonic() - started
    assert reply is not None and not reply.completed and reply.handler_count == 1
    assert 1.0 <= waited < 1.2, waited
    # A refresh slower than the whole budget: the producer stops waiting at the budget all the same.
    slower = SchedulerEventKeys(SlowRefresh(stub, 3.0), None, {})
    started = time.monotonic()
    assert await slower.emit("gateway:shutdown", {"reason": "shutdown", "restartExpectedMs": None, "sleep": 0,
                                                  "marker": str(tmp_path / "never")}, budget_ms=500) is None
    waited = time.monotonic() - started
    assert 0.5 <= waited < 0.65, waited


async def test_hooks_info_reports_unknown_keys_with_their_warnings(stub) -> None:
    out = io.StringIO()
    render(await stub.ListEventKeys(hooks_pb2.ListEventKeysRequest(), timeout=5),
           await stub.GetSubscriptions(hooks_pb2.GetSubscriptionsRequest(), timeout=5), out)
    text = out.getvalue()
    section = text.split("Unknown keys (registered, never emitted by the kernel):\n")[1].split("Contract events:")[0]
    lines = [line.strip() for line in section.splitlines() if line.strip()]
    assert [line.split()[0] for line in lines] == ["session:compact", "command:nwe", "acme:thing"]
    assert all(line.split()[1] == "keys:" and "warning:" in line for line in lines)
    assert "session:compact is not a family or wildcard; subscribe to session:compact:before" in section
    assert "command:nwe is not an event key the kernel emits (command has command:new, command:reset, command:stop)" in section
    assert "acme:thing is a custom key: the kernel never emits it" in section
    # Known keys and families are not in it.
    assert "command:new " not in section and "message " not in section
    assert "  command                  keys" in text.split("Family subscriptions")[1]

"""Our channels end a call at its method's deadline from shared/grpc_client.py's table alone (issue
17): no timeout= at the call site, a real server that answers too late, and that server sees the
deadline (it can bound its own calls by it)."""

from __future__ import annotations

import asyncio
import time

import grpc
import pytest

from covel.hooks.v1 import hooks_pb2, hooks_pb2_grpc
from shared import grpc_client
from shared.grpc_client import CACHE_REFRESH, deadline_of, open_channel
from tests.conftest import free_addr


class SlowHooks(hooks_pb2_grpc.HookDispatcherServicer):
    """A hooks service that answers GetSubscriptions long after its deadline, counting the calls."""

    def __init__(self) -> None:
        self.calls = 0
        self.time_remaining: float | None = None

    async def GetSubscriptions(self, request, context):
        self.calls += 1
        self.time_remaining = context.time_remaining()
        await asyncio.sleep(CACHE_REFRESH.seconds + 20)
        return hooks_pb2.GetSubscriptionsResponse()


@pytest.fixture
async def slow_hooks():
    servicer, addr = SlowHooks(), free_addr()
    server = grpc.aio.server()
    hooks_pb2_grpc.add_HookDispatcherServicer_to_server(servicer, server)
    server.add_insecure_port(addr)
    await server.start()
    try:
        async with open_channel(addr) as channel:
            yield servicer, hooks_pb2_grpc.HookDispatcherStub(channel)
    finally:
        await server.stop(0)


async def test_a_call_past_its_methods_deadline_ends_deadline_exceeded_without_a_timeout_argument(slow_hooks) -> None:
    servicer, hooks = slow_hooks
    assert deadline_of("covel.hooks.v1.HookDispatcher", "GetSubscriptions") == CACHE_REFRESH
    started = time.monotonic()
    with pytest.raises(grpc.aio.AioRpcError) as ended:
        await hooks.GetSubscriptions(hooks_pb2.GetSubscriptionsRequest())
    elapsed = time.monotonic() - started
    assert ended.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert CACHE_REFRESH.seconds - 0.5 <= elapsed < CACHE_REFRESH.seconds + 3, elapsed
    assert servicer.calls == 1  # a deadline is not a reason to re-send
    assert servicer.time_remaining is not None and CACHE_REFRESH.seconds - 1 < servicer.time_remaining < CACHE_REFRESH.seconds + 0.1


async def test_a_callers_tighter_timeout_still_wins(slow_hooks) -> None:
    _, hooks = slow_hooks
    started = time.monotonic()
    with pytest.raises(grpc.aio.AioRpcError) as ended:
        await hooks.GetSubscriptions(hooks_pb2.GetSubscriptionsRequest(), timeout=0.3)
    assert ended.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert time.monotonic() - started < 2


def test_streams_that_last_a_turn_or_a_connection_have_no_deadline() -> None:
    for service, method in [("covel.gateway.v1.LlmGateway", "Generate"), ("covel.scheduler.v1.Scheduler", "SubmitActions"),
                            ("covel.scheduler.v1.Scheduler", "RunManual"), ("covel.registry.v1.PluginRegistry", "WatchCatalogue")]:
        assert deadline_of(service, method).seconds is None, (service, method)
    assert deadline_of("covel.store.v1.TransactionalStore", "CommitTurn").seconds == 30
    assert deadline_of("covel.store.v1.TransactionalStore", "GetSession").seconds == 10


def _with_store_deadline(monkeypatch, method: str, deadline: grpc_client.Deadline) -> None:
    default, methods = grpc_client.DEADLINES["covel.store.v1.TransactionalStore"]
    monkeypatch.setitem(grpc_client.DEADLINES, "covel.store.v1.TransactionalStore", (default, {**methods, method: deadline}))


def test_a_misspelt_method_in_the_deadline_table_is_refused(monkeypatch) -> None:
    _with_store_deadline(monkeypatch, "CommitTurns", grpc_client.TURN_COMMIT)
    with pytest.raises(LookupError, match=r"no such method \['covel.store.v1.TransactionalStore/CommitTurns'\]"):
        grpc_client._deadlines_by_path()


def test_a_method_named_with_no_deadline_does_not_get_its_services_default(monkeypatch) -> None:
    assert "/covel.store.v1.TransactionalStore/ListTurns" in grpc_client._deadlines_by_path()
    _with_store_deadline(monkeypatch, "ListTurns", grpc_client.Deadline(None, "set per call"))
    assert "/covel.store.v1.TransactionalStore/ListTurns" not in grpc_client._deadlines_by_path()


def test_a_deadline_on_a_stream_is_refused(monkeypatch) -> None:
    monkeypatch.setitem(grpc_client.DEADLINES, "covel.gateway.v1.LlmGateway", (grpc_client.PEER_READ, {}))
    with pytest.raises(LookupError, match=r"streams with a deadline \['covel.gateway.v1.LlmGateway/Generate', 'covel.gateway.v1.LlmGateway/TurnModelCalls'\]"):
        grpc_client._deadlines_by_path()


def test_servers_take_the_pings_our_channels_send_while_a_stream_is_open() -> None:
    """A server refuses pings closer than its min_ping_interval_without_data (5 min by default) with GOAWAY
    too_many_pings, which ended every long stream after 120 s (measured: a WatchCatalogue on a server without the
    setting ended UNAVAILABLE at 120 s, with it ran to its 220 s deadline). Our servers take our channels' pings."""
    from shared.grpc_server import KEEPALIVE_PERMITTED
    client_ping_ms = dict(grpc_client.CHANNEL_OPTIONS)["grpc.keepalive_time_ms"]
    assert dict(KEEPALIVE_PERMITTED)["grpc.http2.min_ping_interval_without_data_ms"] < client_ping_ms

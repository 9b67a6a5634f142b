"""Our channels re-send only calls that are safe to repeat (issue 16): a gateway answering
UNAVAILABLE to GenerateOnce or Generate sees each call once, a read is retried; and docs/retries.md
lists exactly the methods shared/grpc_client.py retries, with each method's deadline."""

from __future__ import annotations

import re
from collections import Counter

import grpc
import pytest

from covel.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from shared.grpc_client import all_methods, deadline_of, open_channel, retried_methods, retry_safe
from shared.settings import REPO_ROOT
from tests.conftest import free_addr
from tests.gateway.conftest import user


class AlwaysUnavailable(gateway_pb2_grpc.LlmGatewayServicer):
    """A gateway whose every method answers UNAVAILABLE, counting the calls that reached it."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()

    async def GenerateOnce(self, request, context):
        self.calls["GenerateOnce"] += 1
        await context.abort(grpc.StatusCode.UNAVAILABLE, "down")

    async def Generate(self, request, context):
        self.calls["Generate"] += 1
        await context.abort(grpc.StatusCode.UNAVAILABLE, "down")
        yield gateway_pb2.GenerateEvent()

    async def ListSlots(self, request, context):
        self.calls["ListSlots"] += 1
        await context.abort(grpc.StatusCode.UNAVAILABLE, "down")


@pytest.fixture
async def unavailable_gateway():
    servicer, addr = AlwaysUnavailable(), free_addr()
    server = grpc.aio.server()
    gateway_pb2_grpc.add_LlmGatewayServicer_to_server(servicer, server)
    server.add_insecure_port(addr)
    await server.start()
    try:
        async with open_channel(addr) as channel:
            yield servicer, gateway_pb2_grpc.LlmGatewayStub(channel)
    finally:
        await server.stop(0)


async def test_model_calls_answered_unavailable_are_not_re_sent(unavailable_gateway) -> None:
    servicer, gateway = unavailable_gateway
    request = gateway_pb2.GenerateRequest(slot="story", messages=[user("hello")])
    with pytest.raises(grpc.aio.AioRpcError) as once:
        await gateway.GenerateOnce(request, timeout=10)
    with pytest.raises(grpc.aio.AioRpcError) as streamed:
        async for _ in gateway.Generate(request, timeout=10):
            pass
    assert once.value.code() == streamed.value.code() == grpc.StatusCode.UNAVAILABLE
    assert servicer.calls == {"GenerateOnce": 1, "Generate": 1}


async def test_a_read_answered_unavailable_is_retried(unavailable_gateway) -> None:
    servicer, gateway = unavailable_gateway
    with pytest.raises(grpc.aio.AioRpcError):
        await gateway.ListSlots(gateway_pb2.ListSlotsRequest(), timeout=10)
    assert servicer.calls == {"ListSlots": 4}


def test_writes_that_are_not_idempotent_are_never_retried() -> None:
    for service, method in [("covel.gateway.v1.LlmGateway", "Generate"), ("covel.gateway.v1.LlmGateway", "GenerateOnce"),
                            ("covel.store.v1.TransactionalStore", "CommitTurn"), ("covel.store.v1.TransactionalStore", "ClaimDetachedJob"),
                            ("covel.store.v1.TransactionalStore", "TakeTurnSignals"), ("covel.hooks.v1.HookDispatcher", "Dispatch"),
                            ("covel.hooks.v1.HookDispatcher", "CallTool"), ("covel.scheduler.v1.Scheduler", "SubmitActions"),
                            ("covel.scheduler.v1.Scheduler", "ResetPluginFaults"), ("covel.scheduler.v1.Scheduler", "SetPluginApprovals")]:
        assert not retry_safe(service, method), f"{service}/{method}"


def test_docs_list_exactly_the_retried_methods_and_each_methods_deadline() -> None:
    retried, deadlines, service = set(), {}, ""
    for line in (REPO_ROOT / "docs" / "retries.md").read_text().splitlines():
        if heading := re.fullmatch(r"\*\*`([\w.]+)`\*\*", line):
            service = heading.group(1)
        elif row := re.fullmatch(r"\| `(\w+)` \| (.+?) \| (yes|no)\b.*\|", line):
            method, deadline, resent = row.groups()
            deadlines[service, method] = deadline.split(" ")[0]
            if resent == "yes":
                retried.add((service, method))
    assert retried == set(retried_methods())
    assert deadlines == {(s, m): f"{d.seconds:g}" if d.seconds is not None else "none"
                         for s, m in all_methods() for d in [deadline_of(s, m)]}

"""A peer's failure passed on by a real server names no internal address (issue 18 item 5)."""

from __future__ import annotations

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from shared.errors import ERROR_DOMAIN, INTERNAL_ADDRESS, RETRY_AFTER_MS, error_info, retry_after_ms, rpc
from shared.grpc_server import start_server
from tests.conftest import free_addr


class Relay:
    """Answers by calling a peer that is not there: the peer's UNAVAILABLE is passed on by `rpc`."""

    def __init__(self, peer: str) -> None:
        self.peer = peer

    @rpc
    async def Check(self, request: health_pb2.HealthCheckRequest, context: grpc.aio.ServicerContext) -> health_pb2.HealthCheckResponse:
        async with grpc.aio.insecure_channel(self.peer) as channel:
            return await health_pb2_grpc.HealthStub(channel).Check(request, timeout=5)


async def test_a_relayed_connection_failure_names_no_address() -> None:
    dead_peer = free_addr()  # nothing listens there
    relay = Relay(dead_peer)
    handler = grpc.method_handlers_generic_handler(
        "relay.Relay",
        {"Check": grpc.unary_unary_rpc_method_handler(
            relay.Check, request_deserializer=health_pb2.HealthCheckRequest.FromString,
            response_serializer=health_pb2.HealthCheckResponse.SerializeToString,
        )},
    )

    def add(server: grpc.aio.Server) -> list[str]:
        server.add_generic_rpc_handlers((handler,))
        return []

    addr = free_addr()
    running = await start_server(addr, add)
    try:
        async with grpc.aio.insecure_channel(addr) as channel:
            call = channel.unary_unary(
                "/relay.Relay/Check",
                request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
                response_deserializer=health_pb2.HealthCheckResponse.FromString,
            )
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await call(health_pb2.HealthCheckRequest(), timeout=10)
    finally:
        await running.stop(0)
    assert raised.value.code() == grpc.StatusCode.UNAVAILABLE
    details = raised.value.details()
    host, port = dead_peer.rsplit(":", 1)
    assert port not in details and host not in details and INTERNAL_ADDRESS in details, details
    # A client learns the failure may pass, and when to try again.
    assert error_info(raised.value).reason == "PEER_UNAVAILABLE" and error_info(raised.value).domain == ERROR_DOMAIN
    assert retry_after_ms(raised.value) == RETRY_AFTER_MS

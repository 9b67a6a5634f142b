"""Server reflection as v1 (grpcurl's first try) and v1alpha, on every service: list, then describe."""

from __future__ import annotations

import pytest
from grpc_reflection.v1alpha import reflection_pb2

from shared.grpc_client import open_channel

# Reads only: the session's shared group (tests/e2e/conftest.py).
SHARED_SERVICES = True

pytestmark = pytest.mark.asyncio(loop_scope="session")

SERVICES = {"scheduler": "covel.scheduler.v1.Scheduler", "store": "covel.store.v1.TransactionalStore",
            "registry": "covel.registry.v1.PluginRegistry", "gateway": "covel.gateway.v1.LlmGateway",
            "hooks": "covel.hooks.v1.HookDispatcher"}


async def _ask(channel, version: str, *requests: reflection_pb2.ServerReflectionRequest) -> list[reflection_pb2.ServerReflectionResponse]:
    call = channel.stream_stream(f"/grpc.reflection.{version}.ServerReflection/ServerReflectionInfo",
                                 request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
                                 response_deserializer=reflection_pb2.ServerReflectionResponse.FromString)
    return [answer async for answer in call(iter(requests), timeout=10)]


@pytest.mark.parametrize("version", ["v1", "v1alpha"])
async def test_reflection_lists_and_describes_each_service(services, version) -> None:
    for name, service in SERVICES.items():
        security = services.security(name)
        async with open_channel(services.addrs[name], security=security) as channel:
            listed, described = await _ask(channel, version, reflection_pb2.ServerReflectionRequest(list_services=""),
                                           reflection_pb2.ServerReflectionRequest(file_containing_symbol=service))
        names = {entry.name for entry in listed.list_services_response.service}
        assert {service, "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection",
                "grpc.reflection.v1alpha.ServerReflection"} <= names, (name, names)
        assert described.file_descriptor_response.file_descriptor_proto, (name, described)

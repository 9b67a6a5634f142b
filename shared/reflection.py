"""Server reflection as `grpc.reflection.v1` (what grpcurl and current clients ask first) and `v1alpha` (older
ones). grpcio-reflection serves v1alpha only; v1's messages are the same on the wire (the same fields and
numbers under another package), so the one servicer answers both, the v1 service decoding with v1alpha's
message types. `list` names both services."""

from __future__ import annotations

from collections.abc import Sequence

import grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2, reflection_pb2_grpc

V1_SERVICE_NAME = "grpc.reflection.v1.ServerReflection"


def enable_reflection(service_names: Sequence[str], server: grpc.aio.Server) -> None:
    """Reflection of `service_names` (and of reflection itself) on `server`, as v1 and v1alpha."""
    servicer = reflection.aio.ReflectionServicer([*service_names, reflection.SERVICE_NAME, V1_SERVICE_NAME])
    reflection_pb2_grpc.add_ServerReflectionServicer_to_server(servicer, server)
    v1 = grpc.method_handlers_generic_handler(V1_SERVICE_NAME, {
        "ServerReflectionInfo": grpc.stream_stream_rpc_method_handler(
            servicer.ServerReflectionInfo,
            request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
            response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
        ),
    })
    server.add_generic_rpc_handlers((v1,))

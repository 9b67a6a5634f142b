"""A request that protobuf cannot decode at all (upb refuses messages nested past 100 levels, about
30 levels of Struct) would fail inside gRPC as INTERNAL; DecodeGuardInterceptor turns it into
INVALID_ARGUMENT. start_server installs it innermost.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from shared.errors import invalid_argument


@dataclass(frozen=True)
class Undecodable:
    """Stands in for a request protobuf could not decode; the guard answers it with INVALID_ARGUMENT."""

    reason: str


def _guarded(deserializer: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    if deserializer is None:
        return None

    def decode(data: bytes) -> Any:
        try:
            return deserializer(data)
        except DecodeError as error:
            return Undecodable("nests too deeply" if "Depth" in str(error) else "is not a valid message of its type")

    return decode


class DecodeGuardInterceptor(grpc.aio.ServerInterceptor):
    """Innermost interceptor: a request that cannot be decoded ends INVALID_ARGUMENT, not INTERNAL."""

    async def intercept_service(self, continuation: Any, handler_call_details: Any) -> Any:
        handler = await continuation(handler_call_details)
        # Health and reflection (/grpc.*) are gRPC's own.
        if handler is None or handler_call_details.method.startswith("/grpc."):
            return handler
        if handler.request_streaming:
            # A stream's handler meets an Undecodable among its messages and ends the stream (shared/call_streams.py).
            return grpc.stream_stream_rpc_method_handler(handler.stream_stream, request_deserializer=_guarded(handler.request_deserializer),
                                                         response_serializer=handler.response_serializer) if handler.response_streaming else handler
        make = grpc.unary_stream_rpc_method_handler if handler.response_streaming else grpc.unary_unary_rpc_method_handler
        behaviour = handler.unary_stream if handler.response_streaming else handler.unary_unary
        return make(
            _refusing_undecodable(behaviour, streaming=handler.response_streaming),
            request_deserializer=_guarded(handler.request_deserializer),
            response_serializer=handler.response_serializer,
        )


def _refusing_undecodable(behaviour: Callable[..., Any], *, streaming: bool) -> Callable[..., Any]:
    async def refuse(request: Undecodable, context: grpc.aio.ServicerContext) -> None:
        error = invalid_argument(
            "request",
            f"{request.reason}: protobuf could not decode it (JSON values nest at most about 30 levels); send flatter data",
        )
        await context.abort_with_status(error.to_status())

    if streaming:

        async def stream(request: Any, context: grpc.aio.ServicerContext) -> Any:
            if isinstance(request, Undecodable):
                await refuse(request, context)
                return
            result = behaviour(request, context)
            if inspect.isasyncgen(result):
                async for item in result:
                    yield item
            else:  # a handler that writes with context.write
                await result

        return stream

    async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
        if isinstance(request, Undecodable):
            await refuse(request, context)
            return None
        return await behaviour(request, context)

    return unary

"""Every log line a service writes while answering an RPC carries the session and turn it is about.

The ids come from the request: its own `session_id` / `turn_id`, those of its `context`, `session`
or `origin` (hooks' HookContext, the gateway's CallOrigin), or the id of the `turn` it carries
(the store's CommitTurn). They are bound to structlog's context variables for the RPC's task
(and the tasks it starts), next to the `service` every line has, and unbound when it ends.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, cast

import grpc
import structlog
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

# Where a request names its session or turn, by field path, per message type (built once per type).
_Path = tuple[tuple[str, ...], str]
_paths: dict[str, list[_Path]] = {}
_HOLDERS = ("context", "session", "origin")


def _is_id(field: FieldDescriptor | None) -> bool:
    return field is not None and field.type == FieldDescriptor.TYPE_STRING and not field.is_repeated


def _message_fields(field: FieldDescriptor | None) -> Mapping[str, FieldDescriptor] | None:
    """The fields of a singular message-typed field, else None."""
    if field is None or field.message_type is None or field.is_repeated:
        return None
    return field.message_type.fields_by_name


def _paths_of(descriptor: Descriptor) -> list[_Path]:
    found = _paths.get(descriptor.full_name)
    if found is not None:
        return found
    fields = descriptor.fields_by_name
    found = [((key,), key) for key in ("session_id", "turn_id") if _is_id(fields.get(key))]
    for holder in _HOLDERS:
        nested = _message_fields(fields.get(holder))
        if nested is not None:
            found += [((holder, key), key) for key in ("session_id", "turn_id") if _is_id(nested.get(key))]
    turn = _message_fields(fields.get("turn"))
    if turn is not None and _is_id(turn.get("id")):
        found.append((("turn", "id"), "turn_id"))
    _paths[descriptor.full_name] = found
    return found


def ids_of(request: object) -> dict[str, str]:
    """session_id and turn_id the request names (the first non-empty of each), else nothing."""
    if not isinstance(request, Message):
        return {}
    ids: dict[str, str] = {}
    # The stubs type DESCRIPTOR as the Python or the upb Descriptor; at runtime descriptor.Descriptor is the upb one.
    for path, key in _paths_of(cast(Descriptor, request.DESCRIPTOR)):
        if key in ids:
            continue
        value: object = request
        for name in path:
            value = getattr(value, name)
        if value:
            ids[key] = value  # type: ignore[assignment]
    return ids


class LogContextInterceptor(grpc.aio.ServerInterceptor):
    """Binds the request's session_id and turn_id to the log context while its RPC runs."""

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        if handler is None or handler_call_details.method.startswith("/grpc.health.v1.Health/"):
            return handler
        if handler.unary_unary:
            return grpc.unary_unary_rpc_method_handler(
                _unary(handler.unary_unary),
                request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer,
            )
        if handler.unary_stream and inspect.isasyncgenfunction(handler.unary_stream):
            return grpc.unary_stream_rpc_method_handler(
                _streaming(handler.unary_stream),
                request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer,
            )
        return handler


# grpc.aio runs each RPC in a task of its own, so what is bound here ends with the RPC (no reset:
# a streaming handler may be finalised outside the context it was bound in).


def _bind_ids(request: object) -> None:
    ids = ids_of(request)
    if ids:
        structlog.contextvars.bind_contextvars(**ids)


def _unary(behavior: Callable[..., Any]) -> Callable[..., Any]:
    async def bound(request, context):
        _bind_ids(request)
        return await behavior(request, context)

    return bound


def _streaming(behavior: Callable[..., Any]) -> Callable[..., Any]:
    async def bound(request, context):
        _bind_ids(request)
        async for item in behavior(request, context):
            yield item

    return bound

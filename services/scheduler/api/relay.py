"""The one shape of an RPC answered by a peer as it is: one store or registry call, its reply's fields mapped
onto the public response (public_api.respond)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from google.protobuf.message import Message

from services.scheduler.public_api import respond

M = TypeVar("M", bound=Message)


async def relay(call: Callable[[Any], Awaitable[Any]], request: Message, response_type: type[M], *fields: str) -> M:
    """`call(request)`, answered as a `response_type` carrying the reply's `fields` (same names on both sides)."""
    reply = await call(request)
    return respond(response_type, **{field: getattr(reply, field) for field in fields})

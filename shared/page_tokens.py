"""Page sizes and page tokens of the List RPCs (the store's keyset pages, the scheduler's short lists).

Keyset paging on (a time, an id): a page costs the same however deep it is. The token is that key,
opaque to clients (base64url of JSON); a token this store did not give is INVALID_ARGUMENT.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from shared.errors import invalid_argument

TOKEN_MAX = 512


def page_size(requested: int, default: int, most: int) -> int:
    if requested < 0 or requested > most:
        raise invalid_argument("page_size", f"is {requested}; 1 to {most}, or 0 for {default}")
    return requested or default


def encode_token(at: datetime, row_id: str) -> str:
    key = json.dumps({"u": at.isoformat(), "i": row_id}, separators=(",", ":"))
    return base64.urlsafe_b64encode(key.encode()).decode().rstrip("=")


def decode_token(token: str) -> tuple[datetime, str] | None:
    key = _decoded(token)
    if key is None:
        return None
    try:
        return datetime.fromisoformat(key["u"]), str(key["i"])
    except (ValueError, KeyError, TypeError):
        raise _refusal() from None


def encode_position(position: int) -> str:
    """A page token that is a position in an ordered log (a message's seq, a turn's record_seq)."""
    return base64.urlsafe_b64encode(json.dumps({"p": position}).encode()).decode().rstrip("=")


def decode_position(token: str) -> int | None:
    key = _decoded(token)
    if key is None:
        return None
    position = key.get("p")
    if not isinstance(position, int) or isinstance(position, bool) or position < 0:
        raise _refusal()
    return position


def _decoded(token: str) -> dict[str, Any] | None:
    """A token's JSON object; None for no token; INVALID_ARGUMENT for anything this service did not give."""
    if not token:
        return None
    if len(token) > TOKEN_MAX:
        raise _refusal()
    try:
        key = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (binascii.Error, ValueError):
        raise _refusal() from None
    if not isinstance(key, dict):
        raise _refusal()
    return key


def _refusal() -> Exception:
    return invalid_argument("page_token", "is not a token this service gave; pass next_page_token unchanged, or empty for the first page")

SHORT_PAGE, SHORT_PAGE_MAX = 100, 500


def paged(reply: Any, field: str, request: Any) -> Any:
    """A reply of a short list (worlds, packs, lorebook, commands, panels, ...) cut to the page `request` asks
    for (page_size, page_token), with next_page_token. The list is read whole, then cut: an entry added or
    removed while a client pages may shift the rest by one."""
    size = page_size(request.page_size, SHORT_PAGE, SHORT_PAGE_MAX)
    offset = decode_position(request.page_token) or 0
    items = list(getattr(reply, field))
    del getattr(reply, field)[:]
    getattr(reply, field).extend(items[offset:offset + size])
    reply.next_page_token = encode_position(offset + size) if offset + size < len(items) else ""
    return reply


def pages(field: str) -> Callable[[Callable[..., Awaitable[Any]]], Callable[..., Awaitable[Any]]]:
    """An RPC of a short list answers one page of it: `paged` applied to what the method returns."""
    def wrap(method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        @functools.wraps(method)
        async def paging(self: Any, request: Any, context: Any) -> Any:
            return paged(await method(self, request, context), field, request)
        return paging
    return wrap

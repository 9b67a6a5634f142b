"""Page sizes and page tokens of the store's List RPCs.

Keyset paging on (a time, an id): a page costs the same however deep it is. The token is that key,
opaque to clients (base64url of JSON); a token this store did not give is INVALID_ARGUMENT.
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import datetime

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
    if not token:
        return None
    refusal = invalid_argument("page_token", "is not a token this store gave; pass next_page_token unchanged, or empty for the first page")
    if len(token) > TOKEN_MAX:
        raise refusal
    try:
        key = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        return datetime.fromisoformat(key["u"]), str(key["i"])
    except (binascii.Error, ValueError, KeyError, TypeError):
        raise refusal from None


def encode_position(position: int) -> str:
    """A page token that is a position in an ordered log (a message's seq, a turn's record_seq)."""
    return base64.urlsafe_b64encode(json.dumps({"p": position}).encode()).decode().rstrip("=")


def decode_position(token: str) -> int | None:
    if not token:
        return None
    refusal = invalid_argument("page_token", "is not a token this store gave; pass next_page_token unchanged, or empty for the first page")
    if len(token) > TOKEN_MAX:
        raise refusal
    try:
        position = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))["p"]
    except (binascii.Error, ValueError, KeyError, TypeError):
        raise refusal from None
    if not isinstance(position, int) or isinstance(position, bool):
        raise refusal
    return position

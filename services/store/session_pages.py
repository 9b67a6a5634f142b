"""ListSessions: one principal's sessions, most recently active first, a page at a time.

Keyset paging on (updated_at, id) over the index sessions(owner, updated_at): a page costs the same however
deep it is, and a session that moves (a new turn) while a client pages is seen at most once more, never
skipped. The page token is that key, opaque to clients (base64url of JSON).
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import datetime

from sqlalchemy import and_, or_, select
from sqlalchemy.orm import Session

from covel.store.v1 import store_pb2
from services.store.models import SessionRow
from services.store.proto_mapping import session_to_proto
from shared.errors import invalid_argument

DEFAULT_PAGE, MAX_PAGE = 50, 200
TOKEN_MAX = 512


def page_size(requested: int) -> int:
    if requested < 0 or requested > MAX_PAGE:
        raise invalid_argument("page_size", f"is {requested}; 1 to {MAX_PAGE}, or 0 for {DEFAULT_PAGE}")
    return requested or DEFAULT_PAGE


def encode_token(row: SessionRow) -> str:
    key = json.dumps({"u": row.updated_at.isoformat(), "i": row.id}, separators=(",", ":"))
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


def list_sessions(db: Session, request: store_pb2.ListSessionsRequest) -> store_pb2.ListSessionsResponse:
    size, after = page_size(request.page_size), decode_token(request.page_token)
    statement = select(SessionRow).where(SessionRow.owner == request.owner)
    if not request.include_ended:
        statement = statement.where(SessionRow.status == "active")
    if after is not None:
        updated, session_id = after
        statement = statement.where(or_(SessionRow.updated_at < updated, and_(SessionRow.updated_at == updated, SessionRow.id < session_id)))
    rows = list(db.execute(statement.order_by(SessionRow.updated_at.desc(), SessionRow.id.desc()).limit(size + 1)).scalars())
    more = len(rows) > size
    rows = rows[:size]
    return store_pb2.ListSessionsResponse(sessions=[session_to_proto(row) for row in rows],
                                          next_page_token=encode_token(rows[-1]) if more else "")

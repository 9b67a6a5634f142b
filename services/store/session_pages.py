"""ListSessions: one principal's sessions, most recently active first, a page at a time.

Keyset paging on (updated_at, id) over the index sessions(owner, updated_at): a page costs the same however
deep it is, and a session that moves (a new turn) while a client pages is seen at most once more, never
skipped. The page token is that key (page_tokens.py).
"""

from __future__ import annotations

from sqlalchemy import and_, or_, select
from sqlalchemy.orm import Session

from covel.store.v1 import store_pb2
from services.store.models import SessionRow
from services.store.proto_mapping import session_to_proto
from shared.page_tokens import decode_token, encode_token, page_size

DEFAULT_PAGE, MAX_PAGE = 50, 200


def list_sessions(db: Session, request: store_pb2.ListSessionsRequest) -> store_pb2.ListSessionsResponse:
    size, after = page_size(request.page_size, DEFAULT_PAGE, MAX_PAGE), decode_token(request.page_token)
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
                                          next_page_token=encode_token(rows[-1].updated_at, rows[-1].id) if more else "")

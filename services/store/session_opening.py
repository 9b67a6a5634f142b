"""A session's opening message swapped for another of its world's openings (SetOpening; the scheduler's
SelectOpening): only before the session's first completed player turn, so no story has read it yet."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from covel.common.v1 import common_pb2
from services.store.database import lock_session
from services.store.models import MessageRow, utcnow
from services.store.proto_mapping import message_to_proto
from services.store.session_world import OPENING_MAX
from shared.errors import failed_precondition

__all__ = ["OPENING_MAX", "set_opening"]


def set_opening(db: Session, session_id: str, text: str, opening_id: str) -> tuple[common_pb2.Message, bool]:
    row = lock_session(db, session_id)
    if row.completed_player_turns > 0:
        raise failed_precondition(
            f"session {session_id} has played past its opening; only a story not yet played changes its opening",
            reason="OPENING_PLAYED",
            subject=f"sessions/{session_id}",
        )
    statement = select(MessageRow).where(MessageRow.session_id == session_id, MessageRow.seq == 1, MessageRow.turn_id.is_(None))
    message = db.execute(statement).scalar_one_or_none()
    if message is None or not (message.meta or {}).get("opening"):
        raise failed_precondition(
            f"session {session_id} has no opening of a world to change", reason="NO_OPENING", subject=f"sessions/{session_id}"
        )
    meta = dict(message.meta or {})
    if message.text == text and meta.get("openingId", "") == opening_id:
        return message_to_proto(message), False
    message.text = text
    message.meta = {**meta, "openingId": opening_id}
    row.updated_at = utcnow()
    db.flush()
    return message_to_proto(message), True

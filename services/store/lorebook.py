"""A session's lorebook (store.proto LorebookEntry): entries identified by owner and id.

Owners are "world" (written with the session from the world package), "plugin:<pluginId>" (a plugin's
`lorebook.upsert` / `lorebook.delete` proposals, only its own) and "player" (the player's edits through
the scheduler API). The store checks the entry's shape and sizes; who may write which owner is the
caller's rule (the scheduler's API writes "player" entries only, a proposal its plugin's).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from covel.store.v1 import store_pb2
from services.store.models import LorebookRow
from services.store.proto_mapping import timestamp
from shared.errors import invalid_argument
from shared.lorebook import ENTRIES_MAX
from shared.lorebook_rules import activation_from_proto, activation_to_proto


def entry_to_proto(row: LorebookRow | Any) -> store_pb2.LorebookEntry:
    return store_pb2.LorebookEntry(owner=row.owner, id=row.entry_id, title=row.title, keys=list(row.keys or []), content=row.content,
                                   constant=row.constant, disabled=row.disabled, version=row.version, updated_at=timestamp(row.updated_at),
                                   activation=activation_to_proto(row.activation))


def _rules(entry: store_pb2.LorebookEntry) -> dict[str, Any] | None:
    return (activation_from_proto(entry.activation) or None) if entry.HasField("activation") else None


def put_entry(db: Session, session_id: str, entry: store_pb2.LorebookEntry, turn_id: str | None, now: datetime) -> store_pb2.LorebookEntry:
    """Create or replace (version + 1); refuses a new entry past ENTRIES_MAX for the session."""
    row = db.get(LorebookRow, (session_id, entry.owner, entry.id))
    if row is None:
        count = db.execute(select(func.count()).select_from(LorebookRow).where(LorebookRow.session_id == session_id)).scalar_one()
        if count >= ENTRIES_MAX:
            raise invalid_argument("entry", f"the session's lorebook holds {ENTRIES_MAX} entries, its most; delete one first")
        row = LorebookRow(session_id=session_id, owner=entry.owner, entry_id=entry.id, version=0, created_at=now)
        db.add(row)
    row.title, row.keys, row.content = entry.title, [key.strip() for key in entry.keys], entry.content
    row.constant, row.disabled, row.activation = entry.constant, entry.disabled, _rules(entry)
    row.version, row.turn_id, row.updated_at = row.version + 1, turn_id, now
    db.flush()
    return entry_to_proto(row)


def add_world_entries(db: Session, session_id: str, entries: list[store_pb2.LorebookEntry], now: datetime) -> None:
    """A new session's world entries (checked with its world, at most ENTRIES_MAX): version 1 each, in one flush."""
    db.add_all(LorebookRow(session_id=session_id, owner=entry.owner, entry_id=entry.id, title=entry.title,
                           keys=[key.strip() for key in entry.keys], content=entry.content, constant=entry.constant,
                           disabled=entry.disabled, activation=_rules(entry), version=1, turn_id=None, created_at=now, updated_at=now) for entry in entries)
    db.flush()


def delete_entry(db: Session, session_id: str, owner: str, entry_id: str) -> bool:
    result = db.execute(delete(LorebookRow).where(LorebookRow.session_id == session_id, LorebookRow.owner == owner,
                                                  LorebookRow.entry_id == entry_id))
    return bool(getattr(result, "rowcount", 0))


def entries(db: Session, session_id: str) -> list[store_pb2.LorebookEntry]:
    rows = db.execute(select(LorebookRow).where(LorebookRow.session_id == session_id)
                      .order_by(LorebookRow.owner, LorebookRow.entry_id)).scalars()
    return [entry_to_proto(row) for row in rows]

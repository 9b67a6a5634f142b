"""The context a proposal is applied through at commit, and the store's limits on what it writes.

`ApplyContext` buffers messages, events and plugin-data writes of the turn's transaction; `Rejected` is a
proposal the store will not apply; `json_sized` is the one size check on a stored value. The appliers are in
proposals.py (narrative, plugin data, events, exports, summaries) and world_proposals.py (characters,
dimensions, lorebook).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Connection, Table
from sqlalchemy.orm import Session

from covel.store.v1 import store_pb2
from services.store import plugin_data
from services.store.datasets import Dataset
from services.store.models import MessageRow, TurnEventRow
from services.store.records import EventRecord, MessageRecord
from shared.ids import new_id

STORY_METADATA_KEYS = ("segments", "cues", "yield", "presentCharacterIds")
SUMMARY_MAX_CHARS = 20_000
VALUE_MAX_BYTES = 256 * 1024
# The writer of a world's own rows (services/store/session_world.py).
WORLD_WRITER_PREFIX = "world:"
OPERATIONS_MAX = 100
BATCH_MAX = 200
DIMENSIONS_MAX = 100
NAME_MAX = 200
HIDDEN_PREFIX = "_hidden."
LIMITS = {"value_max_bytes": VALUE_MAX_BYTES, "operations_max": OPERATIONS_MAX, "batch_max": BATCH_MAX}
EVENT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/-]*$")


class Rejected(Exception):
    """A proposal the store will not apply; the message is the outcome's reason."""

    def __init__(self, message: str, code: str = "invalid-proposal") -> None:
        super().__init__(message)
        self.code = code


@dataclass
class ApplyContext:
    """What the appliers write through. Messages and events are buffered rows (written by
    `write_rows`, with Core, many at a time); plugin data is buffered in `data`; the world's
    rows (WRITES_AT_ONCE) go through the ORM session at once."""

    db: Session
    connection: Connection
    session_id: str
    turn_id: str
    logical_turn: int
    now: datetime
    # The seq the next appended message gets; rolled back with its savepoint.
    next_seq: int
    datasets: dict[tuple[str, str], Dataset] = field(default_factory=dict)
    dimension_owners: frozenset[str] = frozenset()
    appended: list[MessageRecord] = field(default_factory=list)
    # Events seq 1..n in the order emitted.
    events: list[EventRecord] = field(default_factory=list)
    # Plugin-data writes, buffered per unit (flushed at the end of each unit).
    data: plugin_data.UnitWrites = field(init=False)
    # How many of `appended` / `events` write_rows has written.
    _written: tuple[int, int] = (0, 0)

    def __post_init__(self) -> None:
        self.data = plugin_data.UnitWrites(self.connection, self.session_id, self.turn_id, self.now)

    def prefetch(self, proposals: list[store_pb2.Proposal]) -> None:
        """Read in one query the current values these plugin.data.update proposals need."""
        addresses = set()
        for proposal in proposals:
            if proposal.type == "plugin.data.update":
                fields = proposal.payload.fields
                namespace, key = fields.get("namespace"), fields.get("key")
                if namespace is not None and key is not None and namespace.string_value and key.string_value:
                    addresses.add((proposal.plugin_id, namespace.string_value, key.string_value))
        if addresses:
            self.data.prefetch(addresses)

    def mark(self) -> tuple[int, int, int]:
        return self.next_seq, len(self.appended), len(self.events)

    def rollback_to(self, mark: tuple[int, int, int]) -> None:
        """Forget the rows appended since `mark` (their unit rolled back; rows written meanwhile went with its savepoint)."""
        self.next_seq, appended, events = mark
        del self.appended[appended:]
        del self.events[events:]
        self._written = (min(self._written[0], appended), min(self._written[1], events))

    def append_message(self, *, role: str, text: str, plugin_id: str = "", runtime_id: str = "", meta: dict[str, Any] | None = None) -> MessageRecord:
        row = MessageRecord(
            id=new_id(),
            session_id=self.session_id,
            turn_id=self.turn_id,
            seq=self.next_seq,
            role=role,
            plugin_id=plugin_id,
            runtime_id=runtime_id,
            text=text,
            meta=meta or {},
            created_at=self.now,
        )
        self.next_seq += 1
        self.appended.append(row)
        return row

    def write_rows(self) -> None:
        """Write the messages and events appended since the last call (one statement each)."""
        messages, events = self.appended[self._written[0]:], self.events[self._written[1]:]
        if messages:
            self.connection.execute(_MESSAGES_INSERT, [message_values(row) for row in messages])
        if events:
            self.connection.execute(_EVENTS_INSERT, [event_values(row) for row in events])
        self._written = (len(self.appended), len(self.events))


# A declarative class with __tablename__ always maps a Table; DeclarativeBase types __table__ as any FromClause.
_MESSAGES = cast(Table, MessageRow.__table__)
_EVENTS = cast(Table, TurnEventRow.__table__)
# Built once: building a statement costs more than running it.
_MESSAGES_INSERT = _MESSAGES.insert()
_EVENTS_INSERT = _EVENTS.insert()


def message_values(row: MessageRecord) -> dict[str, Any]:
    return {"id": row.id, "session_id": row.session_id, "turn_id": row.turn_id, "seq": row.seq, "role": row.role, "plugin_id": row.plugin_id,
            "runtime_id": row.runtime_id, "text": row.text, "metadata": row.meta, "created_at": row.created_at,
            "hidden": row.hidden}


def event_values(row: EventRecord) -> dict[str, Any]:
    return {"id": row.id, "session_id": row.session_id, "turn_id": row.turn_id, "seq": row.seq, "plugin_id": row.plugin_id,
            "runtime_id": row.runtime_id, "name": row.name, "payload": row.payload, "created_at": row.created_at}


def json_sized(what: str, value: Any) -> str:
    """The value's compact JSON text (plugin data writes it as it is), refused past VALUE_MAX_BYTES."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    size = len(text) if text.isascii() else len(text.encode())
    if size > VALUE_MAX_BYTES:
        raise Rejected(f"{what} is {size} bytes of JSON; the limit is {VALUE_MAX_BYTES}", "size-limit")
    return text

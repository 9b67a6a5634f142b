"""The rows a commit writes with Core (turn, messages, events), as plain records.

An ORM instance costs 15-35 µs to build (instrumented attributes, events); the commit builds a few
a turn, never adds them to the session, and only reads their fields back for the reply. A record
has the fields of its table's columns (tests/store/test_commit_path.py holds them equal).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(slots=True)
class TurnRecord:
    id: str
    session_id: str
    record_seq: int
    logical_turn: int
    status: str
    idempotency_key: str | None
    origin: str
    actions: list[Any]
    player_message: str
    narrative: str
    abort_reason: str
    runtime_results: list[Any]
    proposal_outcomes: list[Any]
    hook_trace: list[Any]
    started_at: datetime | None
    finished_at: datetime | None
    recorded_at: datetime
    trace_id: str
    source_turn_id: str | None
    retryable: bool
    parent_turn_id: str | None = None
    version_of: str | None = None
    off_line: bool = False


@dataclass(slots=True)
class MessageRecord:
    id: str
    session_id: str
    turn_id: str | None
    seq: int
    role: str
    plugin_id: str
    runtime_id: str
    text: str
    # The `metadata` column (MessageRow.meta).
    meta: dict[str, Any]
    created_at: datetime
    hidden: bool = False


@dataclass(slots=True)
class EventRecord:
    id: str
    session_id: str
    turn_id: str
    seq: int
    plugin_id: str
    runtime_id: str
    name: str
    payload: Any
    created_at: datetime

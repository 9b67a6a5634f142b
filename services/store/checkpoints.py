"""A session's state as a committed turn left it, kept with the turn (turn_checkpoints), and put back.

What a checkpoint holds is everything a turn's commit may change and the next turn reads: plugin data, the
world model (character schema, characters, dimensions), the lorebook, exports, hook state, settlement
receipts, interactions, and the session's counters (player turns and messages, phase, setup progress). What
it leaves out: the log and the turns (story_line.py hides the messages of turns off the line instead), the
detached job queue (story_line.py supersedes the jobs of turns off the line), and memory-search's vectors (an
index by content hash: a vector of a record that is gone is never a candidate again).

Rows travel as JSON, made by the database (to_jsonb / json_object): their columns by name, times as ISO text,
without the session id and the tables' autoincrement ids (a restore writes them into any session: the same one,
or a branch).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, cast

from sqlalchemy import JSON, Table, TextClause, bindparam, select, text
from sqlalchemy.orm import Session

from services.store.models import (
    Base,
    CharacterRow,
    CharacterSchemaRow,
    DimensionRow,
    DimensionSettlementRow,
    ExportRow,
    HookStateRow,
    InteractionRow,
    LorebookRow,
    PluginDataRow,
    SessionRow,
    TurnCheckpointRow,
    UtcDateTime,
)

_STATE_MODELS: tuple[type[Base], ...] = (
    PluginDataRow, CharacterSchemaRow, CharacterRow, DimensionRow, LorebookRow, ExportRow, HookStateRow,
    DimensionSettlementRow, InteractionRow,
)
_TABLES = tuple(cast(Table, model.__table__) for model in _STATE_MODELS)
# Columns naming a turn: a branch gives its copies of the turns new ids (restore's `turn_ids`).
TURN_COLUMNS = frozenset({"turn_id", "resolved_turn_id", "answered_turn_id", "source_turn_id"})
# The session's own columns a turn's commit changes and a checkpoint keeps.
SESSION_COLUMNS = ("completed_player_turns", "player_messages", "phase", "setup_runtimes")
CHECKPOINTS = cast(Table, TurnCheckpointRow.__table__)
_CHECKPOINT_OF = select(CHECKPOINTS.c.state).where(CHECKPOINTS.c.turn_id == bindparam("b_turn"))


def _kept_columns(table: Table) -> list[str]:
    return [column.name for column in table.columns
            if column.name != "session_id" and not (column.primary_key and column.autoincrement is True and column.name == "id")]


_KEPT = {table.name: _kept_columns(table) for table in _TABLES}
_TIMES = {table.name: {column.name for column in table.columns if isinstance(column.type, UtcDateTime)} for table in _TABLES}


def record(db: Session, session: SessionRow, turn_id: str) -> None:
    """Keep the checkpoint of a turn just committed (inside its commit's transaction): one statement, the rows
    turned into JSON by the database itself (a commit's statements do not grow with the session's state)."""
    connection = db.connection()
    counters = json.dumps({name: getattr(session, name) for name in SESSION_COLUMNS})
    connection.execute(_record_statement(connection.dialect.name), {"b_turn": turn_id, "b_session": session.id, "b_counters": counters})


@functools.cache
def _record_statement(dialect: str) -> TextClause:
    postgres = dialect == "postgresql"
    parts = []
    for table in _TABLES:
        if postgres:
            dropped = "".join(f" - '{name}'" for name in (column.name for column in table.columns) if name not in _KEPT[table.name])
            rows = f"(SELECT coalesce(jsonb_agg(to_jsonb(t){dropped}), '[]'::jsonb) FROM {table.name} t WHERE t.session_id = CAST(:b_session AS varchar))"
        else:
            fields = ", ".join(f"'{name}', {_sqlite_value(table, name)}" for name in _KEPT[table.name])
            rows = f"(SELECT coalesce(json_group_array(json_object({fields})), json('[]')) FROM {table.name} WHERE session_id = :b_session)"
        parts.append(f"'{table.name}', {rows}")
    counters = "CAST(:b_counters AS jsonb)" if postgres else "json(:b_counters)"
    build = "jsonb_build_object" if postgres else "json_object"
    session = "CAST(:b_session AS varchar)" if postgres else ":b_session"
    return text(f"INSERT INTO turn_checkpoints (turn_id, session_id, state) VALUES (:b_turn, {session}, "
                f"{build}('session', {counters}, {', '.join(parts)}))")


def _sqlite_value(table: Table, name: str) -> str:
    """A column as json_object takes it: JSON columns as JSON (SQLite keeps them as text), the rest as they are."""
    return f"json({name})" if isinstance(table.c[name].type, JSON) else name


def state_of(db: Session, turn_id: str) -> dict[str, Any] | None:
    """The checkpoint a committed turn left, or None (a turn recorded before checkpoints were kept, or not committed)."""
    found = db.connection().execute(_CHECKPOINT_OF, {"b_turn": turn_id}).one_or_none()
    return None if found is None else cast(dict[str, Any], found.state)


def restore(db: Session, session: SessionRow, state: Mapping[str, Any], turn_ids: Mapping[str, str] | None = None) -> None:
    """Put a checkpoint's state into `session` (its rows replaced; its counters set on the row, for the caller to
    write). `turn_ids` maps the turn ids the rows name to the ids they take (a branch's copies)."""
    connection = db.connection()
    for table in _TABLES:
        connection.execute(table.delete().where(table.c.session_id == session.id))
        rows = [_row_for(table.name, row, session.id, turn_ids or {}) for row in state.get(table.name, [])]
        if rows:
            connection.execute(table.insert(), rows)
    for name, value in state.get("session", {}).items():
        if name in SESSION_COLUMNS:
            setattr(session, name, value)


def _row_for(table: str, row: Mapping[str, Any], session_id: str, turn_ids: Mapping[str, str]) -> dict[str, Any]:
    times = _TIMES[table]
    values: dict[str, Any] = {"session_id": session_id}
    for name in _KEPT[table]:
        value = row.get(name)
        if name in times:
            value = _from_json(value)
        elif name in TURN_COLUMNS and isinstance(value, str):
            value = turn_ids.get(value, value)
        values[name] = value
    return values


def _from_json(value: str | None) -> datetime | None:
    """PostgreSQL writes an offset; SQLite keeps naive UTC text."""
    if value is None:
        return None
    parsed = datetime.fromisoformat(value)
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)

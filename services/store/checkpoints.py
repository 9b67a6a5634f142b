"""A session's state as a committed turn left it, kept with the turn (turn_checkpoints), and put back.

What a checkpoint holds is everything a turn's commit may change and the next turn reads: plugin data (by writer:
the rows this turn wrote, and every row's key with the turn that last wrote it, whose checkpoint holds its value), the
world model (character schema, characters, dimensions), the lorebook, exports, hook state, settlement
receipts, interactions, and the session's counters (player turns and messages, phase, setup progress). What
it leaves out: the log and the turns (story_line.py hides the messages of turns off the line instead), the
detached job queue (story_line.py supersedes the jobs of turns off the line), and memory-search's vectors (an
index by content hash: a vector of a record that is gone is never a candidate again).

Rows travel as JSON, made by the database (jsonb_build_object / json_object): their columns by name, times as ISO text,
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
# Plugin data is kept by writer: a checkpoint holds the rows its turn wrote, and the index of every row's key and the turn
# that last wrote it (None: the session's start), whose checkpoint holds its value (restore finds it there).
PLUGIN_DATA = cast(Table, PluginDataRow.__table__).name
INDEX = "plugin_data_index"
INDEX_COLUMNS = ("plugin_id", "namespace", "key", "turn_id")
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
    # The session's start (keyed by its id) keeps the rows no turn wrote (its world's data).
    writer = "" if turn_id == session.id else turn_id
    connection.execute(_record_statement(connection.dialect.name),
                       {"b_turn": turn_id, "b_session": session.id, "b_counters": counters, "b_writer": writer})


@functools.cache
def _record_statement(dialect: str) -> TextClause:
    postgres = dialect == "postgresql"
    parts = []
    session_id = "CAST(:b_session AS varchar)" if postgres else ":b_session"
    for table in _TABLES:
        where = f"session_id = {session_id}"
        if table.name == PLUGIN_DATA:
            # Plugin data, the big one: the rows this turn wrote in full, every row's key and writer in the index.
            where += " AND coalesce(turn_id, '') = " + ("CAST(:b_writer AS varchar)" if postgres else ":b_writer")
            parts.append(f"'{INDEX}', {_rows(table, INDEX_COLUMNS, f'session_id = {session_id}', postgres)}")
        parts.append(f"'{table.name}', {_rows(table, _KEPT[table.name], where, postgres)}")
    counters = "CAST(:b_counters AS jsonb)" if postgres else "json(:b_counters)"
    build = "jsonb_build_object" if postgres else "json_object"
    session = "CAST(:b_session AS varchar)" if postgres else ":b_session"
    return text(f"INSERT INTO turn_checkpoints (turn_id, session_id, state) VALUES (:b_turn, {session}, "
                f"{build}('session', {counters}, {', '.join(parts)}))")


def _rows(table: Table, columns: list[str] | tuple[str, ...], where: str, postgres: bool) -> str:
    """A subquery: the table's rows that match `where`, as a JSON array of objects of `columns`."""
    if postgres:
        fields = ", ".join(f"'{name}', {name}" for name in columns)
        return f"(SELECT coalesce(jsonb_agg(jsonb_build_object({fields})), '[]'::jsonb) FROM {table.name} WHERE {where})"
    fields = ", ".join(f"'{name}', {_sqlite_value(table, name)}" for name in columns)
    return f"(SELECT coalesce(json_group_array(json_object({fields})), json('[]')) FROM {table.name} WHERE {where})"


def _sqlite_value(table: Table, name: str) -> str:
    """A column as json_object takes it: JSON columns as JSON (SQLite keeps them as text), the rest as they are."""
    return f"json({name})" if isinstance(table.c[name].type, JSON) else name


def state_of(db: Session, turn_id: str) -> dict[str, Any] | None:
    """The checkpoint a committed turn left, or None (a turn recorded before checkpoints were kept, or not committed)."""
    found = db.connection().execute(_CHECKPOINT_OF, {"b_turn": turn_id}).one_or_none()
    return None if found is None else cast(dict[str, Any], found.state)


def restore(db: Session, session: SessionRow, state: Mapping[str, Any], turn_ids: Mapping[str, str] | None = None,
            source_session_id: str = "") -> None:
    """Put a checkpoint's state into `session` (its rows replaced; its counters set on the row, for the caller to
    write). `turn_ids` maps the turn ids the rows name to the ids they take (a branch's copies); the checkpoints its
    plugin data index names are those of `source_session_id` (default: `session`)."""
    connection = db.connection()
    held = {**state, PLUGIN_DATA: _indexed_rows(db, state, source_session_id or session.id)}
    for table in _TABLES:
        connection.execute(table.delete().where(table.c.session_id == session.id))
        rows = [_row_for(table.name, row, session.id, turn_ids or {}) for row in held.get(table.name, [])]
        if rows:
            connection.execute(table.insert(), rows)
    for name, value in state.get("session", {}).items():
        if name in SESSION_COLUMNS:
            setattr(session, name, value)


def _indexed_rows(db: Session, state: Mapping[str, Any], session_id: str) -> list[dict[str, Any]]:
    """The plugin data rows of a checkpoint: each indexed key's value from the checkpoint of the turn that wrote it."""
    index = state.get(INDEX, [])
    writers = {entry["turn_id"] or session_id for entry in index}
    found = db.connection().execute(select(CHECKPOINTS.c.turn_id, CHECKPOINTS.c.state).where(CHECKPOINTS.c.turn_id.in_(writers))).all()
    written = {(writer, row["plugin_id"], row["namespace"], row["key"]): row for writer, held in found for row in held.get(PLUGIN_DATA, [])}
    rows = []
    for entry in index:
        row = written.get((entry["turn_id"] or session_id, entry["plugin_id"], entry["namespace"], entry["key"]))
        if row is None:
            raise RuntimeError(f"checkpoint of turn {entry['turn_id']} lacks plugin data {entry['plugin_id']}/{entry['namespace']}/{entry['key']}")
        rows.append(row)
    return rows


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

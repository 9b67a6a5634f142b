"""Plugin data: JSON values a plugin keeps per session under (plugin_id, namespace, key)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import delete as sql_delete
from sqlalchemy import bindparam, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from services.store.models import PluginDataRow
from services.store.operations import MISSING

NAMESPACE_MAX = 200
KEY_MAX = 500


_UPSERTS: dict[str, Any] = {}


def _upsert_statement(dialect: str) -> Any:
    """INSERT ... ON CONFLICT DO UPDATE, built once per dialect (building it costs more than running it)."""
    if dialect not in _UPSERTS:
        table = PluginDataRow.__table__
        insert = pg_insert if dialect == "postgresql" else sqlite_insert
        columns = ("session_id", "plugin_id", "namespace", "key", "value", "turn_id", "created_at", "updated_at")
        statement = insert(table).values({name: bindparam(name, type_=table.c[name].type) for name in columns})
        _UPSERTS[dialect] = statement.on_conflict_do_update(
            index_elements=["session_id", "plugin_id", "namespace", "key"],
            set_={"value": statement.excluded.value, "turn_id": statement.excluded.turn_id, "updated_at": statement.excluded.updated_at},
        )
    return _UPSERTS[dialect]


def upsert(
    db: Session, *, session_id: str, plugin_id: str, namespace: str, key: str, value: Any, turn_id: str, now: datetime
) -> None:
    """One conditional statement (INSERT ... ON CONFLICT DO UPDATE) on either backend."""
    connection = db.connection()
    connection.execute(
        _upsert_statement(connection.dialect.name),
        {
            "session_id": session_id,
            "plugin_id": plugin_id,
            "namespace": namespace,
            "key": key,
            "value": value,
            "turn_id": turn_id,
            "created_at": now,
            "updated_at": now,
        },
    )


def current_value(db: Session, *, session_id: str, plugin_id: str, namespace: str, key: str) -> Any:
    """The stored value (this transaction's earlier writes included), or operations.MISSING."""
    row = db.execute(
        select(PluginDataRow).where(
            PluginDataRow.session_id == session_id,
            PluginDataRow.plugin_id == plugin_id,
            PluginDataRow.namespace == namespace,
            PluginDataRow.key == key,
        )
    ).scalar_one_or_none()
    return MISSING if row is None else row.value


def delete(db: Session, *, session_id: str, plugin_id: str, namespace: str, key: str) -> bool:
    result = db.execute(
        sql_delete(PluginDataRow).where(
            PluginDataRow.session_id == session_id,
            PluginDataRow.plugin_id == plugin_id,
            PluginDataRow.namespace == namespace,
            PluginDataRow.key == key,
        )
    )
    return bool(result.rowcount)

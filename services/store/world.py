"""The world model's rows: character schema (versioned), characters (CAS on version),
dimensions (owned, versioned), and exports (the latest value per recordAs)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, bindparam, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from covel.store.v1 import store_pb2
from services.store.models import CharacterRow, CharacterSchemaRow, DimensionRow, ExportRow
from services.store.proto_mapping import timestamp
from services.store.sessions import find_session
from services.store.turn_reads import world_model
from shared.structs import to_value


class Conflict(Exception):
    """A version check failed (expectedVersion, or an already initialized dimension)."""


class Invalid(Exception):
    pass


def set_character_schema(db: Session, session_id: str, types: list[str], attributes: dict[str, Any], plugin_id: str, turn_id: str | None,
                         now: datetime) -> int:
    row = db.get(CharacterSchemaRow, session_id)
    if row is None:
        row = CharacterSchemaRow(session_id=session_id, version=0)
        db.add(row)
    row.version += 1
    row.types, row.attributes, row.plugin_id, row.turn_id, row.updated_at = list(types), dict(attributes), plugin_id, turn_id, now
    db.flush()
    return row.version


def upsert_character(db: Session, session_id: str, character_id: str, expected: int, data: dict[str, Any], plugin_id: str, turn_id: str | None,
                     now: datetime) -> int:
    schema = db.get(CharacterSchemaRow, session_id)
    kind = data.get("type")
    if schema is not None and schema.types and kind is not None and kind not in schema.types:
        raise Invalid(f"character.type {kind!r} is not in the schema's types ({', '.join(schema.types)})")
    row = db.get(CharacterRow, (session_id, character_id))
    current = 0 if row is None else row.version
    if current != expected:
        state = "does not exist" if row is None else f"is at version {current}"
        raise Conflict(f"character {character_id} {state}, not at expectedVersion {expected}")
    if row is None:
        row = CharacterRow(session_id=session_id, character_id=character_id, version=0, created_at=now)
        db.add(row)
    row.version += 1
    row.data, row.plugin_id, row.turn_id, row.updated_at = data, plugin_id, turn_id, now
    db.flush()
    return row.version


def dimensions_for_update(db: Session, session_id: str, ids: list[Any]) -> dict[str, DimensionRow]:
    wanted = [item for item in ids if isinstance(item, str)]
    if not wanted:
        return {}
    rows = db.execute(select(DimensionRow).where(DimensionRow.session_id == session_id, DimensionRow.dimension_id.in_(wanted)))
    return {row.dimension_id: row for row in rows.scalars()}


def initialize_dimensions(db: Session, session_id: str, items: list[dict[str, Any]], plugin_id: str, turn_id: str | None,
                          now: datetime) -> None:
    existing = dimensions_for_update(db, session_id, [item["id"] for item in items])
    seen: set[str] = set()
    for item in items:
        if item["id"] in existing or item["id"] in seen:
            raise Conflict(f"dimension {item['id']} is already initialized; use dimension.update")
        seen.add(item["id"])
    for item in items:
        db.add(
            DimensionRow(
                session_id=session_id,
                dimension_id=item["id"],
                owner_plugin_id=plugin_id,
                name=str(item.get("name", "")),
                description=str(item.get("description", "")),
                schema=item["schema"],
                value=item["value"],
                version=1,
                turn_id=turn_id,
                updated_at=now,
            )
        )
    db.flush()


def update_dimension(row: DimensionRow, value: Any, turn_id: str, now: datetime) -> None:
    row.value, row.version, row.turn_id, row.updated_at = value, row.version + 1, turn_id, now


def record_export(db: Session, row: ExportRow) -> None:
    db.execute(_export_upsert(db.get_bind().dialect.name), {column: getattr(row, column) for column in _EXPORT_COLUMNS})


_EXPORT_COLUMNS = ("session_id", "plugin_id", "record_as", "runtime_id", "value", "turn_id", "logical_turn", "updated_at")
_EXPORT_UPSERTS: dict[str, Any] = {}


def _export_upsert(dialect: str) -> Any:
    """INSERT ... ON CONFLICT DO UPDATE of an export, built once per dialect (building it costs more than running it)."""
    if dialect not in _EXPORT_UPSERTS:
        table = cast(Table, ExportRow.__table__)
        insert = pg_insert if dialect == "postgresql" else sqlite_insert
        statement = insert(table).values({name: bindparam(name, type_=table.c[name].type) for name in _EXPORT_COLUMNS})
        _EXPORT_UPSERTS[dialect] = statement.on_conflict_do_update(
            index_elements=["session_id", "plugin_id", "record_as"],
            set_={name: statement.excluded[name] for name in ("runtime_id", "value", "turn_id", "logical_turn", "updated_at")},
        )
    return _EXPORT_UPSERTS[dialect]


def get_world(db: Session, session_id: str) -> store_pb2.GetWorldResponse:
    find_session(db, session_id)
    return world_model(db, session_id)


def list_exports(db: Session, request: store_pb2.ListExportsRequest) -> list[store_pb2.Export]:
    find_session(db, request.session_id)
    statement = select(ExportRow).where(ExportRow.session_id == request.session_id)
    if request.plugin_id:
        statement = statement.where(ExportRow.plugin_id == request.plugin_id)
    if request.record_as:
        statement = statement.where(ExportRow.record_as == request.record_as)
    statement = statement.order_by(ExportRow.plugin_id, ExportRow.record_as)
    return [
        store_pb2.Export(
            plugin_id=row.plugin_id,
            record_as=row.record_as,
            runtime_id=row.runtime_id,
            value=to_value(row.value),
            turn_id=row.turn_id,
            logical_turn=row.logical_turn,
            updated_at=timestamp(row.updated_at),
        )
        for row in db.execute(statement).scalars()
    ]

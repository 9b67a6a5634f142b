"""A new session's world (CreateSessionRequest.world): its character schema, characters, dimensions,
opening and the plugins' share of the world's data, checked before any database work and written in the session's own transaction with
the world model's writers (world.py), so a session never exists with half its world."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from jsonschema.exceptions import SchemaError
from sqlalchemy.orm import Session

from covel.store.v1 import store_pb2
from services.store import checkpoints, lorebook, sessions, world
from services.store.apply_context import Rejected, json_sized
from services.store.datasets import DatasetViolation, dataset
from services.store.models import MessageRow, PluginDataRow, SessionRow
from services.store.proposals import check_namespace, entry_address
from services.store.world_data_managed import managed_row
from shared import json_schemas
from shared.errors import invalid_argument
from shared.ids import new_id
from shared.lorebook import ENTRIES_MAX, check_entry
from shared.lorebook_rules import settings_from_proto
from shared.plugin_data.operations import json_size
from shared.structs import from_struct, from_value

NAME_MAX = 200
VALUE_MAX_BYTES = 256 * 1024
ITEMS_MAX = 1000
OPENING_MAX = 20_000
# As many records as the registry lets one world import (services/registry/world_data.py).
PLUGIN_DATA_MAX = 20_000
WRITER_PREFIX = "world:"


def _sized(field: str, value: Any) -> None:
    size = json_size(value)
    if size > VALUE_MAX_BYTES:
        raise invalid_argument(field, f"is {size} bytes of JSON; the limit is {VALUE_MAX_BYTES}")


def _check_id(field: str, value: str, seen: set[str]) -> None:
    if not value or len(value) > NAME_MAX:
        raise invalid_argument(field, f"must be a non-empty id of at most {NAME_MAX} characters")
    if value in seen:
        raise invalid_argument(field, f"{value!r} is given twice")
    seen.add(value)


def check_session_world(request: store_pb2.SessionWorld) -> None:
    """INVALID_ARGUMENT naming the field for anything the world model would refuse."""
    if not request.writer.startswith(WRITER_PREFIX) or len(request.writer) > NAME_MAX:
        raise invalid_argument("world.writer", f"name the world as {WRITER_PREFIX}<world id>")
    if len(request.opening) > OPENING_MAX:
        raise invalid_argument("world.opening", f"is longer than {OPENING_MAX} characters")
    types: list[Any] = []
    if request.HasField("character_schema"):
        schema = from_struct(request.character_schema)
        types = schema.get("types") or []
        if not isinstance(types, list) or not all(isinstance(item, str) and item for item in types):
            raise invalid_argument("world.character_schema.types", "must be a list of non-empty strings")
        if not isinstance(schema.get("attributes", {}), dict):
            raise invalid_argument("world.character_schema.attributes", "must be an object")
        _sized("world.character_schema", schema)
    if len(request.characters) > ITEMS_MAX or len(request.dimensions) > ITEMS_MAX:
        raise invalid_argument("world", f"at most {ITEMS_MAX} characters and {ITEMS_MAX} dimensions")
    seen: set[str] = set()
    for index, character in enumerate(request.characters):
        _check_id(f"world.characters[{index}].id", character.id, seen)
        data = from_struct(character.data)
        if types and data.get("type") is not None and data["type"] not in types:
            raise invalid_argument(f"world.characters[{index}].data.type", f"{data['type']!r} is not one of the schema's types")
        _sized(f"world.characters[{index}].data", data)
    seen = set()
    for index, dimension in enumerate(request.dimensions):
        _check_id(f"world.dimensions[{index}].id", dimension.id, seen)
        _check_dimension(index, dimension)
    check_plugin_data(request)
    _check_lorebook(request)


def _check_lorebook(request: store_pb2.SessionWorld) -> None:
    settings = request.lorebook_settings
    for name, value, most in (("scan_depth", settings.scan_depth, 1000), ("token_budget", settings.token_budget, 100_000),
                              ("max_recursion", settings.max_recursion, 10)):
        if not 0 <= value <= most:
            raise invalid_argument(f"world.lorebook_settings.{name}", f"is {value}; 0 to {most}")
    if len(request.lorebook) > ENTRIES_MAX:
        raise invalid_argument("world.lorebook", f"holds {len(request.lorebook)} entries; at most {ENTRIES_MAX}")
    seen: set[str] = set()
    for index, entry in enumerate(request.lorebook):
        where = f"world.lorebook[{index}]"
        if entry.owner != "world":
            raise invalid_argument(f"{where}.owner", "a world's lorebook entries are owned by world")
        check_entry(entry, where)
        _check_id(f"{where}.id", entry.id, seen)


def check_plugin_data(request: store_pb2.SessionWorld, field: str = "world.plugin_data") -> None:
    """The world's data, through the same rules as a plugin's own set: namespace, key, size, then the
    receiving plugin's dataset (set allowed, the record fits its schema)."""
    if len(request.plugin_data) > PLUGIN_DATA_MAX:
        raise invalid_argument(field, f"holds {len(request.plugin_data)} records; a session imports at most {PLUGIN_DATA_MAX}")
    policies = {(p.plugin_id, p.namespace): dataset(p.plugin_id, p.namespace, from_struct(p.schema) if p.HasField("schema") else None,
                                                    list(p.ops)) for p in request.datasets}
    seen: set[tuple[str, str, str]] = set()
    for index, entry in enumerate(request.plugin_data):
        where = f"{field}[{index}]"
        if not entry.plugin_id or len(entry.plugin_id) > NAME_MAX:
            raise invalid_argument(f"{where}.plugin_id", f"must be the receiving plugin's id, at most {NAME_MAX} characters")
        try:
            namespace, key = entry_address("world data", {"namespace": entry.namespace, "key": entry.key}, where)
            check_namespace("world data", namespace)
            value = from_value(entry.value)
            json_sized(f"world data {namespace}/{key}", value)
            policy = policies.get((entry.plugin_id, namespace))
            if policy is not None:
                policy.check_kinds(["set"])
                policy.check_record(key, value)
        except (Rejected, DatasetViolation) as error:
            raise invalid_argument(where, f"plugin {entry.plugin_id}: {error}") from None
        if (entry.plugin_id, namespace, key) in seen:
            raise invalid_argument(where, f"plugin {entry.plugin_id} {namespace}/{key} is given twice")
        seen.add((entry.plugin_id, namespace, key))


def _check_dimension(index: int, dimension: store_pb2.Dimension) -> None:
    where = f"world.dimensions[{index}]"
    try:
        validator = json_schemas.checked_validator(from_struct(dimension.schema))
    except (SchemaError, json_schemas.PatternError) as error:
        raise invalid_argument(f"{where}.schema", f"is not a valid JSON Schema: {getattr(error, 'message', error)}") from None
    value = from_value(dimension.value)
    errors = list(validator.iter_errors(value))
    if errors:
        raise invalid_argument(f"{where}.value", f"does not match the dimension's schema: {errors[0].message}")
    _sized(f"{where}.value", value)


def create_session_in_world(db: Session, session: store_pb2.Session, request: store_pb2.SessionWorld | None) -> store_pb2.Session:
    """sessions.create_session, then the world's rows, then the checkpoint of its start (a retry of its first turn
    restores it), in the one transaction of `db`."""
    created = sessions.create_session(db, session)
    row = db.get(SessionRow, created.id)
    assert row is not None
    if request is not None:
        _write_world(db, row, request, row.created_at)
        db.flush()
    checkpoints.record(db, row, row.id)
    return created


def _write_world(db: Session, row: SessionRow, request: store_pb2.SessionWorld, now: datetime) -> None:
    """The world's rows for the new session `row` (flushed, not yet committed)."""
    writer = request.writer
    if request.HasField("character_schema"):
        schema = from_struct(request.character_schema)
        world.set_character_schema(db, row.id, schema.get("types") or [], schema.get("attributes") or {}, writer, None, now)
    for character in request.characters:
        world.upsert_character(db, row.id, character.id, 0, from_struct(character.data), writer, None, now)
    if request.dimensions:
        items = [{"id": d.id, "name": d.name, "description": d.description, "schema": from_struct(d.schema), "value": from_value(d.value)}
                 for d in request.dimensions]
        world.initialize_dimensions(db, row.id, items, writer, None, now)
    lorebook.add_world_entries(db, row.id, list(request.lorebook), now)
    if request.HasField("lorebook_settings"):
        row.lorebook_settings = settings_from_proto(request.lorebook_settings) or None
    db.add_all(PluginDataRow(session_id=row.id, plugin_id=entry.plugin_id, namespace=entry.namespace, key=entry.key,
                             value=from_value(entry.value), turn_id=None, created_at=now, updated_at=now)
               for entry in request.plugin_data)
    if request.plugin_data:
        db.add(managed_row(row.id, list(dict.fromkeys((e.plugin_id, e.namespace, e.key) for e in request.plugin_data)), now))
    if request.opening:
        row.last_message_seq = 1
        db.add(MessageRow(id=new_id(), session_id=row.id, turn_id=None, seq=1, role="story", plugin_id="", runtime_id="",
                          text=request.opening, meta={"opening": True, "worldId": writer.removeprefix(WRITER_PREFIX)}, created_at=now))
        db.flush()

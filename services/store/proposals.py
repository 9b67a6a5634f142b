"""How each proposal type is applied at commit, inside the turn's transaction.

An applier either writes (through the `ApplyContext`) or raises `Rejected` with a code and a
reason the author can act on. Every write is attributed to `proposal.plugin_id`.
New proposal types register in `APPLIERS`. Payload shapes (JSON in Proposal.payload):

- narrative.append     {text} or {segments: [{text, ...}]}, optional segments/cues/yield/presentCharacterIds
- plugin.data          {namespace, key, value}                      (a set)
- plugin.data.batch    {entries: [{namespace, key, value}, ...]}    (each a set; all or nothing)
- plugin.data.delete   {namespace, key}                             (a delete; a missing key is fine)
- plugin.data.update   {namespace, key, operations: [{op, path, ...}]}  (shared/plugin_data/operations.py)
- character.schema.set {types: [string], attributes: {...}}         (the store bumps the version)
- character.upsert     {characterId, expectedVersion, character: {...}}  (0 = must not exist yet)
- dimension.initialize {dimensions: [{id, name, description?, schema, value}]}   (trusted owners only)
- dimension.update     {updates: [{id, value, expectedVersion}]}   (whole batch CAS; owner only)
- lorebook.upsert      {id, title?, keys, content, constant?, disabled?}   (the plugin's own entry, owner plugin:<id>)
- lorebook.delete      {id}
- event.emit           {name, payload?}
- export.record        {recordAs, value}                            (io.output.recordAs)
- history.summary      {text, throughSeq, messageCount}             (history compaction: the log up to
                       throughSeq is read as this summary from now on; the messages stay stored)

Limits (documented numbers, see LIMITS below): a stored value (plugin data after the operations,
a character, a dimension value, an export, an event payload) is at most 256 KiB of compact
UTF-8 JSON; an update has at most 100 operations; a batch at most 200 entries; a dimension
batch at most 100 items.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

from jsonschema.exceptions import SchemaError
from sqlalchemy import Connection, Table
from sqlalchemy.orm import Session

from covel.store.v1 import store_pb2
from services.store import lorebook, plugin_data, world
from services.store.datasets import Dataset, DatasetViolation
from services.store.models import ExportRow, MessageRow, TurnEventRow
from services.store.records import EventRecord, MessageRecord
from shared import json_schemas
from shared.errors import ServiceError
from shared.ids import new_id
from shared.lorebook import check_entry
from shared.plugin_data.operations import DELETED, MISSING, OperationError, apply_operations, operation_kinds
from shared.structs import from_struct

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
            "runtime_id": row.runtime_id, "text": row.text, "metadata": row.meta, "created_at": row.created_at}


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


def _story_text(payload: dict[str, Any]) -> str:
    text = payload.get("text")
    if text is not None and not isinstance(text, str):
        raise Rejected("narrative.append: payload.text must be a string")
    if text:
        return text
    segments = payload.get("segments") or []
    if not isinstance(segments, list) or not all(isinstance(item, dict) for item in segments):
        raise Rejected("narrative.append: payload.segments must be a list of objects")
    return "\n\n".join(str(item.get("text", "")) for item in segments if item.get("text"))


def apply_narrative_append(context: ApplyContext, proposal: store_pb2.Proposal) -> None:
    payload = from_struct(proposal.payload)
    text = _story_text(payload)
    if not text.strip():
        raise Rejected("narrative.append: the story is empty (give payload.text or segments with text)")
    meta = {key: payload[key] for key in STORY_METADATA_KEYS if key in payload}
    context.append_message(role="story", text=text, plugin_id=proposal.plugin_id, runtime_id=proposal.runtime_id, meta=meta)


# --- plugin data ---


def entry_address(kind: str, item: dict[str, Any], where: str = "payload") -> tuple[str, str]:
    namespace, key = item.get("namespace"), item.get("key")
    if not isinstance(namespace, str) or not namespace.strip():
        raise Rejected(f"{kind}: {where}.namespace must be a non-empty string")
    if len(namespace) > plugin_data.NAMESPACE_MAX:
        raise Rejected(f"{kind}: {where}.namespace is longer than {plugin_data.NAMESPACE_MAX} characters")
    if not isinstance(key, str) or not key:
        raise Rejected(f"{kind}: {where}.key must be a non-empty string")
    if len(key) > plugin_data.KEY_MAX:
        raise Rejected(f"{kind}: {where}.key is longer than {plugin_data.KEY_MAX} characters")
    return namespace, key


def check_namespace(kind: str, namespace: str) -> None:
    """`_…` belongs to the kernel; the one exception is the writing plugin's own `_hidden.<name>`.

    Writes are attributed to the proposing plugin, so `_hidden.x` written here is always that
    plugin's own hidden namespace; `_dimensions`, `_dimension-settlements`, `_memory` and any
    other `_` name are refused.
    """
    if not namespace.startswith("_"):
        return
    hidden = namespace[len(HIDDEN_PREFIX):] if namespace.startswith(HIDDEN_PREFIX) else ""
    if hidden and not hidden.startswith("_"):
        return
    raise Rejected(
        f"{kind}: namespace {namespace!r} is reserved (names starting with _ belong to the kernel; "
        f"a plugin may write only its own _hidden.<namespace>)",
        "reserved-namespace",
    )


class _DataWriter:
    def __init__(self, context: ApplyContext, proposal: store_pb2.Proposal) -> None:
        self.context = context
        self.proposal = proposal

    def _dataset(self, namespace: str) -> Dataset | None:
        return self.context.datasets.get((self.proposal.plugin_id, namespace))

    def _address(self, namespace: str, key: str) -> plugin_data.Address:
        return (self.proposal.plugin_id, namespace, key)

    def _checked(self, kind: str, namespace: str, key: str, kinds: list[str], value: Any) -> None:
        policy = self._dataset(namespace)
        if policy is None:
            return
        try:
            policy.check_kinds(kinds)
            if value is not DELETED:
                policy.check_record(key, value)
        except DatasetViolation as error:
            raise Rejected(f"{kind}: {error}", "dataset-violation") from None

    def set(self, kind: str, namespace: str, key: str, value: Any) -> None:
        check_namespace(kind, namespace)
        text = json_sized(f"{kind}: the value of {namespace}/{key}", value)
        self._checked(kind, namespace, key, ["set"], value)
        self.context.data.set(self._address(namespace, key), value, text)

    def delete(self, kind: str, namespace: str, key: str) -> None:
        check_namespace(kind, namespace)
        self._checked(kind, namespace, key, ["delete"], DELETED)
        self.context.data.delete(self._address(namespace, key))

    def update(self, kind: str, namespace: str, key: str, operations: list[Any]) -> None:
        check_namespace(kind, namespace)
        policy = self._dataset(namespace)
        if policy is not None:
            try:
                policy.check_kinds(operation_kinds(operations))
            except DatasetViolation as error:
                raise Rejected(f"{kind}: {error}", "dataset-violation") from None
        current = self.context.data.get(self._address(namespace, key))
        try:
            value = apply_operations(current, operations)
        except OperationError as error:
            raise Rejected(f"{kind}: {namespace}/{key}: {error}", "operation-failed") from None
        if value is DELETED or value is MISSING:
            self.context.data.delete(self._address(namespace, key))
            return
        text = json_sized(f"{kind}: the value of {namespace}/{key} after the operations", value)
        if policy is not None:
            try:
                policy.check_record(key, value)
            except DatasetViolation as error:
                raise Rejected(f"{kind}: {error}", "dataset-violation") from None
        self.context.data.set(self._address(namespace, key), value, text)


def apply_plugin_data(context: ApplyContext, proposal: store_pb2.Proposal) -> None:
    payload = from_struct(proposal.payload)
    namespace, key = entry_address("plugin.data", payload)
    if "value" not in payload:
        raise Rejected("plugin.data: payload.value is required (null is a value)")
    _DataWriter(context, proposal).set("plugin.data", namespace, key, payload["value"])


def apply_plugin_data_batch(context: ApplyContext, proposal: store_pb2.Proposal) -> None:
    entries = from_struct(proposal.payload).get("entries")
    if not isinstance(entries, list) or not entries:
        raise Rejected("plugin.data.batch: payload.entries must be a non-empty list of {namespace, key, value}")
    if len(entries) > BATCH_MAX:
        raise Rejected(f"plugin.data.batch: {len(entries)} entries; the limit is {BATCH_MAX}", "size-limit")
    writer = _DataWriter(context, proposal)
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise Rejected(f"plugin.data.batch: entries[{index}] must be an object {{namespace, key, value}}")
        namespace, key = entry_address("plugin.data.batch", entry, f"entries[{index}]")
        if "value" not in entry:
            raise Rejected(f"plugin.data.batch: entries[{index}].value is required (null is a value)")
        writer.set(f"plugin.data.batch: entries[{index}]", namespace, key, entry["value"])


def apply_plugin_data_delete(context: ApplyContext, proposal: store_pb2.Proposal) -> None:
    namespace, key = entry_address("plugin.data.delete", from_struct(proposal.payload))
    _DataWriter(context, proposal).delete("plugin.data.delete", namespace, key)


def apply_plugin_data_update(context: ApplyContext, proposal: store_pb2.Proposal) -> None:
    payload = from_struct(proposal.payload)
    namespace, key = entry_address("plugin.data.update", payload)
    operations = payload.get("operations")
    if not isinstance(operations, list) or not operations:
        raise Rejected("plugin.data.update: payload.operations must be a non-empty list of {op, path, ...}")
    if len(operations) > OPERATIONS_MAX:
        raise Rejected(f"plugin.data.update: {len(operations)} operations; the limit is {OPERATIONS_MAX}", "size-limit")
    _DataWriter(context, proposal).update("plugin.data.update", namespace, key, operations)


# --- world model ---


def apply_character_schema_set(context: ApplyContext, proposal: store_pb2.Proposal) -> None:
    payload = from_struct(proposal.payload)
    types, attributes = payload.get("types"), payload.get("attributes")
    if not isinstance(types, list) or not all(isinstance(item, str) and item for item in types):
        raise Rejected("character.schema.set: payload.types must be a list of non-empty strings")
    if not isinstance(attributes, dict):
        raise Rejected("character.schema.set: payload.attributes must be an object")
    json_sized("character.schema.set: the schema", payload)
    world.set_character_schema(context.db, context.session_id, types, attributes, proposal.plugin_id, context.turn_id, context.now)


def apply_character_upsert(context: ApplyContext, proposal: store_pb2.Proposal) -> None:
    payload = from_struct(proposal.payload)
    character_id, expected, character = payload.get("characterId"), payload.get("expectedVersion"), payload.get("character")
    if not isinstance(character_id, str) or not character_id or len(character_id) > NAME_MAX:
        raise Rejected(f"character.upsert: payload.characterId must be a non-empty string of at most {NAME_MAX} characters")
    if not isinstance(expected, int) or isinstance(expected, bool) or expected < 0:
        raise Rejected("character.upsert: payload.expectedVersion must be the version you read (0: a new character)")
    if not isinstance(character, dict):
        raise Rejected("character.upsert: payload.character must be an object")
    json_sized(f"character.upsert: character {character_id}", character)
    try:
        world.upsert_character(context.db, context.session_id, character_id, expected, character, proposal.plugin_id, context.turn_id, context.now)
    except world.Conflict as error:
        raise Rejected(f"character.upsert: {error}", "version-conflict") from None
    except world.Invalid as error:
        raise Rejected(f"character.upsert: {error}") from None


def _trusted(context: ApplyContext, proposal: store_pb2.Proposal, kind: str) -> None:
    if proposal.plugin_id not in context.dimension_owners:
        raise Rejected(f"{kind}: plugin {proposal.plugin_id} is not a trusted dimension owner", "untrusted-writer")


def _check_schema(kind: str, where: str, schema: Any) -> Any:
    if not isinstance(schema, dict):
        raise Rejected(f"{kind}: {where}.schema must be a JSON Schema object")
    try:
        return json_schemas.checked_validator(schema)
    except SchemaError as error:
        raise Rejected(f"{kind}: {where}.schema does not compile: {error.message}") from None


def _check_value(kind: str, where: str, validator: Any, value: Any) -> None:
    errors = sorted(validator.iter_errors(value), key=lambda error: list(error.absolute_path))
    if errors:
        shown = "; ".join(error.message for error in errors[:3])
        raise Rejected(f"{kind}: {where}.value does not match the dimension's schema: {shown}", "schema-violation")


def _batch(kind: str, payload: dict[str, Any], name: str) -> list[dict[str, Any]]:
    items = payload.get(name)
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise Rejected(f"{kind}: payload.{name} must be a list of objects")
    if len(items) > DIMENSIONS_MAX:
        raise Rejected(f"{kind}: {len(items)} items; the limit is {DIMENSIONS_MAX}", "size-limit")
    return items


def apply_dimension_initialize(context: ApplyContext, proposal: store_pb2.Proposal) -> None:
    kind = "dimension.initialize"
    _trusted(context, proposal, kind)
    items = _batch(kind, from_struct(proposal.payload), "dimensions")
    for index, item in enumerate(items):
        where = f"dimensions[{index}]"
        dimension_id = item.get("id")
        if not isinstance(dimension_id, str) or not dimension_id or len(dimension_id) > NAME_MAX:
            raise Rejected(f"{kind}: {where}.id must be a non-empty string")
        if "value" not in item:
            raise Rejected(f"{kind}: {where}.value is required")
        _check_value(kind, where, _check_schema(kind, where, item.get("schema")), item["value"])
        json_sized(f"{kind}: {where}.value", item["value"])
    try:
        world.initialize_dimensions(context.db, context.session_id, items, proposal.plugin_id, context.turn_id, context.now)
    except world.Conflict as error:
        raise Rejected(f"{kind}: {error}", "version-conflict") from None


def apply_dimension_update(context: ApplyContext, proposal: store_pb2.Proposal) -> None:
    kind = "dimension.update"
    _trusted(context, proposal, kind)
    items = _batch(kind, from_struct(proposal.payload), "updates")
    ids = [item.get("id") for item in items]
    for index, dimension_id in enumerate(ids):
        if dimension_id in ids[:index]:
            raise Rejected(f"{kind}: updates[{index}]: dimension {dimension_id!r} is updated twice in one batch")
    current = world.dimensions_for_update(context.db, context.session_id, ids)
    for index, item in enumerate(items):
        where = f"updates[{index}]"
        dimension_id, expected = item.get("id"), item.get("expectedVersion")
        if not isinstance(expected, int) or isinstance(expected, bool):
            raise Rejected(f"{kind}: {where}.expectedVersion must be the version you read")
        if "value" not in item:
            raise Rejected(f"{kind}: {where}.value is required")
        row = current.get(dimension_id) if isinstance(dimension_id, str) else None
        if row is None:
            raise Rejected(f"{kind}: {where}: dimension {dimension_id!r} is not initialized", "version-conflict")
        # The world's own dimensions (written at session start by `world:<id>`) are kept by its trusted owners.
        if row.owner_plugin_id != proposal.plugin_id and not row.owner_plugin_id.startswith(WORLD_WRITER_PREFIX):
            raise Rejected(f"{kind}: {where}: dimension {dimension_id} belongs to {row.owner_plugin_id}", "untrusted-writer")
        if row.version != expected:
            raise Rejected(
                f"{kind}: {where}: dimension {dimension_id} is at version {row.version}, not {expected}; nothing in the batch was applied",
                "version-conflict",
            )
        _check_value(kind, where, _check_schema(kind, where, row.schema), item["value"])
        json_sized(f"{kind}: {where}.value", item["value"])
    for item in items:
        world.update_dimension(current[item["id"]], item["value"], context.turn_id, context.now)
    context.db.flush()


# --- lorebook ---


def _plugin_entry(kind: str, proposal: store_pb2.Proposal, payload: dict[str, Any]) -> store_pb2.LorebookEntry:
    """The proposing plugin's own entry (owner plugin:<id>), checked as every lorebook entry."""
    keys = payload.get("keys") or []
    if not isinstance(keys, list) or not all(isinstance(key, str) for key in keys):
        raise Rejected(f"{kind}: keys must be a list of words")
    fields = {name: payload.get(name) for name in ("id", "title", "content")}
    if any(value is not None and not isinstance(value, str) for value in fields.values()):
        raise Rejected(f"{kind}: id, title and content are strings")
    entry = store_pb2.LorebookEntry(owner=f"plugin:{proposal.plugin_id}", id=fields["id"] or "", title=fields["title"] or "", keys=keys,
                                    content=fields["content"] or "", constant=payload.get("constant") is True,
                                    disabled=payload.get("disabled") is True)
    try:
        check_entry(entry, "payload")
    except ServiceError as error:
        raise Rejected(f"{kind}: {error.violations[0].field if error.violations else 'payload'} {error.message}") from None
    return entry


def apply_lorebook_upsert(context: ApplyContext, proposal: store_pb2.Proposal) -> None:
    entry = _plugin_entry("lorebook.upsert", proposal, from_struct(proposal.payload))
    try:
        lorebook.put_entry(context.db, context.session_id, entry, context.turn_id, context.now)
    except ServiceError as error:
        raise Rejected(f"lorebook.upsert: {error.message}", "size-limit") from None


def apply_lorebook_delete(context: ApplyContext, proposal: store_pb2.Proposal) -> None:
    entry_id = from_struct(proposal.payload).get("id")
    if not isinstance(entry_id, str) or not entry_id:
        raise Rejected("lorebook.delete: id must be the id of one of this plugin's entries")
    lorebook.delete_entry(context.db, context.session_id, f"plugin:{proposal.plugin_id}", entry_id)


# --- events and exports ---


def apply_event_emit(context: ApplyContext, proposal: store_pb2.Proposal) -> None:
    payload = from_struct(proposal.payload)
    name = payload.get("name")
    if not isinstance(name, str) or not EVENT_NAME.match(name) or len(name) > NAME_MAX:
        raise Rejected("event.emit: payload.name must be an event name (letters, digits, . _ : / -)")
    json_sized("event.emit: payload.payload", payload.get("payload"))
    context.events.append(
        EventRecord(
            id=new_id(),
            session_id=context.session_id,
            turn_id=context.turn_id,
            seq=len(context.events) + 1,
            plugin_id=proposal.plugin_id,
            runtime_id=proposal.runtime_id,
            name=name,
            payload=payload.get("payload"),
            created_at=context.now,
        )
    )


def apply_export_record(context: ApplyContext, proposal: store_pb2.Proposal) -> None:
    payload = from_struct(proposal.payload)
    record_as = payload.get("recordAs")
    if not isinstance(record_as, str) or not record_as or len(record_as) > NAME_MAX:
        raise Rejected("export.record: payload.recordAs must be the io.output.recordAs name")
    if "value" not in payload:
        raise Rejected("export.record: payload.value is required")
    json_sized(f"export.record: {record_as}", payload["value"])
    world.record_export(
        context.db,
        ExportRow(
            session_id=context.session_id,
            plugin_id=proposal.plugin_id,
            record_as=record_as,
            runtime_id=proposal.runtime_id,
            value=payload["value"],
            turn_id=context.turn_id,
            logical_turn=context.logical_turn,
            updated_at=context.now,
        ),
    )


def apply_history_summary(context: ApplyContext, proposal: store_pb2.Proposal) -> None:
    payload = from_struct(proposal.payload)
    text, through, count = payload.get("text"), payload.get("throughSeq"), payload.get("messageCount")
    if not isinstance(text, str) or not text.strip():
        raise Rejected("history.summary: payload.text must be a non-empty string")
    if len(text) > SUMMARY_MAX_CHARS:
        raise Rejected(f"history.summary: payload.text has {len(text)} characters; at most {SUMMARY_MAX_CHARS}", "size-limit")
    if not isinstance(through, int) or isinstance(through, bool) or not 1 <= through < context.next_seq:
        raise Rejected(f"history.summary: payload.throughSeq must be the seq of a stored message (1-{context.next_seq - 1})")
    meta = {"throughSeq": through, "messageCount": count if isinstance(count, int) else 0}
    context.append_message(role="summary", text=text, plugin_id=proposal.plugin_id, runtime_id=proposal.runtime_id, meta=meta)


APPLIERS: dict[str, Callable[[ApplyContext, store_pb2.Proposal], None]] = {
    "narrative.append": apply_narrative_append,
    "plugin.data": apply_plugin_data,
    "plugin.data.batch": apply_plugin_data_batch,
    "plugin.data.delete": apply_plugin_data_delete,
    "plugin.data.update": apply_plugin_data_update,
    "character.schema.set": apply_character_schema_set,
    "character.upsert": apply_character_upsert,
    "dimension.initialize": apply_dimension_initialize,
    "dimension.update": apply_dimension_update,
    "lorebook.upsert": apply_lorebook_upsert,
    "lorebook.delete": apply_lorebook_delete,
    "event.emit": apply_event_emit,
    "export.record": apply_export_record,
    "history.summary": apply_history_summary,
}


# Types whose appliers write through the ORM session at once: a unit holding one needs a savepoint
# to be rolled back alone. The others only append to the context's buffers.
WRITES_AT_ONCE = frozenset({"character.schema.set", "character.upsert", "dimension.initialize", "dimension.update", "export.record",
                            "lorebook.upsert", "lorebook.delete"})


def apply(context: ApplyContext, proposal: store_pb2.Proposal) -> None:
    applier = APPLIERS.get(proposal.type)
    if applier is None:
        raise Rejected(f"unknown proposal type {proposal.type!r}; this store applies {', '.join(sorted(APPLIERS))}", "unknown-type")
    applier(context, proposal)

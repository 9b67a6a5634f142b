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
- lorebook.upsert      {id, title?, keys, content, constant?, disabled?, activation?}   (the plugin's own entry, owner plugin:<id>)
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

from collections.abc import Callable
from typing import Any

from covel.store.v1 import store_pb2
from services.store import plugin_data, world
from services.store.apply_context import (
    BATCH_MAX,
    EVENT_NAME,
    HIDDEN_PREFIX,
    NAME_MAX,
    OPERATIONS_MAX,
    STORY_METADATA_KEYS,
    SUMMARY_MAX_CHARS,
    ApplyContext,
    Rejected,
    json_sized,
)
from services.store.datasets import Dataset, DatasetViolation
from services.store.models import ExportRow
from services.store.records import EventRecord
from services.store.world_proposals import (
    apply_character_schema_set,
    apply_character_upsert,
    apply_dimension_initialize,
    apply_dimension_update,
    apply_lorebook_delete,
    apply_lorebook_upsert,
)
from shared.ids import new_id
from shared.plugin_data.operations import DELETED, MISSING, OperationError, apply_operations, operation_kinds
from shared.structs import from_struct


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

"""How the world model's proposals are applied at commit: characters, their schema, dimensions (trusted
owners only, a whole batch compared and set), and a plugin's own lorebook entries."""

from __future__ import annotations

from typing import Any

from jsonschema.exceptions import SchemaError

from covel.store.v1 import store_pb2
from services.store import lorebook, world
from services.store.apply_context import DIMENSIONS_MAX, NAME_MAX, WORLD_WRITER_PREFIX, ApplyContext, Rejected, json_sized
from shared import json_schemas
from shared.errors import ServiceError
from shared.lorebook import check_entry
from shared.lorebook_rules import INTEGER_RULES, activation_to_proto, rules_problem
from shared.structs import from_struct


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
    rules = payload.get("activation")
    problem = rules_problem(rules) if rules is not None else ""
    if problem:
        raise Rejected(f"{kind}: {problem}")
    entry = store_pb2.LorebookEntry(owner=f"plugin:{proposal.plugin_id}", id=fields["id"] or "", title=fields["title"] or "", keys=keys,
                                    content=fields["content"] or "", constant=payload.get("constant") is True,
                                    disabled=payload.get("disabled") is True)
    if rules:
        entry.activation.CopyFrom(activation_to_proto({name: int(value) if name in INTEGER_RULES else value
                                                       for name, value in rules.items()}))
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

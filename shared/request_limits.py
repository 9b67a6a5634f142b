"""What every request meets before a servicer reads it.

- Ids (`id`, `*_id`, `*_ids` string fields, at any depth) are at most MAX_ID_CHARS long, so a
  megabyte id is refused at the door instead of reaching a query and an error message.
- On the client API (TEXT_CHECKED_PACKAGES), no text (string fields, Struct keys and strings)
  holds a NUL character: PostgreSQL refuses it in text and JSON, so it would fail deep in a write
  instead of at the door. Internal calls carry plugin output, which the store refuses per unit.
- Every google.protobuf.Struct / Value / ListValue passes structs.struct_problem: no NaN or
  Infinity, at most structs.MAX_DEPTH levels.
- A request that protobuf cannot decode at all is refused by shared/decode_guard.py's interceptor.

`shared.errors.rpc` runs `request_violation` on every request.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from google.protobuf import struct_pb2
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from shared.structs import NUL, NUL_PROBLEM, struct_problem

MAX_ID_CHARS = 256
TEXT_CHECKED_PACKAGES = frozenset({"covel.scheduler.v1"})
# Request messages of this repo nest a few levels; deeper is only Structs, which are walked apart.
MAX_MESSAGE_DEPTH = 10
_STRUCT_TYPES = (struct_pb2.Struct.DESCRIPTOR.full_name, struct_pb2.Value.DESCRIPTOR.full_name, struct_pb2.ListValue.DESCRIPTOR.full_name)


def _is_id_field(field: FieldDescriptor) -> bool:
    return field.type == FieldDescriptor.TYPE_STRING and (field.name == "id" or field.name.endswith(("_id", "_ids")))


def _items(field: FieldDescriptor, value: Any, path: str) -> Iterator[tuple[str, Any]]:
    """(path, element) of a singular, repeated or map field's value."""
    message_type = field.message_type
    if message_type is not None and message_type.GetOptions().map_entry:
        for key, item in value.items():
            yield f"{path}[{str(key)[:40]}]", item
    elif field.is_repeated:
        for index, item in enumerate(value):
            yield f"{path}[{index}]", item
    else:
        yield path, value


def request_violation(message: Message, prefix: str = "", depth: int = 0, *, text: bool | None = None) -> tuple[str, str] | None:
    """(field path, what is wrong) for the first id, text or Struct over the limits; None when all fit. Every request
    passes here: a first walk builds no paths and skips the fields that cannot be wrong; only a request it finds
    wrong is walked again for the path (_violation_at)."""
    if text is None:
        text = message.DESCRIPTOR.file.package in TEXT_CHECKED_PACKAGES
    if _fits(message, depth, text):
        return None
    return _violation_at(message, prefix, depth, text=text)


# What a field's items need: nothing, an id's length (and NUL, with text), NUL (with text), a Struct's check, a walk.
_SKIP, _ID, _TEXT, _STRUCT, _MESSAGE = range(5)
_KINDS: dict[FieldDescriptor, tuple[bool, int]] = {}


def _kind(field: FieldDescriptor) -> tuple[bool, int]:
    """(whether its value is a map, what each of its items needs): as _items and _item_violation treat them."""
    found = _KINDS.get(field)
    if found is None:
        message_type = field.message_type
        is_map = message_type is not None and message_type.GetOptions().map_entry
        item = message_type.fields_by_name["value"] if message_type is not None and is_map else field
        if item.type == FieldDescriptor.TYPE_STRING:
            need = _ID if _is_id_field(field) else _TEXT
        elif item.message_type is None:
            need = _SKIP
        else:
            need = _STRUCT if item.message_type.full_name in _STRUCT_TYPES else _MESSAGE
        found = _KINDS[field] = (is_map, need)
    return found


def _fits(message: Message, depth: int, text: bool) -> bool:
    """request_violation's checks without paths: True when the message holds nothing over the limits."""
    if depth > MAX_MESSAGE_DEPTH:
        return True
    for field, value in message.ListFields():
        is_map, need = _kind(field)
        if need == _SKIP or (need == _TEXT and not text):
            continue
        items = value.values() if is_map else value if field.is_repeated else (value,)
        for item in items:
            if need == _MESSAGE:
                if not _fits(item, depth + 1, text):
                    return False
            elif need == _STRUCT:
                if struct_problem(item, text=text) is not None:
                    return False
            elif (need == _ID and len(item) > MAX_ID_CHARS) or (text and NUL in item):
                return False
    return True


def _violation_at(message: Message, prefix: str = "", depth: int = 0, *, text: bool | None = None) -> tuple[str, str] | None:
    if depth > MAX_MESSAGE_DEPTH:
        return None
    if text is None:
        text = message.DESCRIPTOR.file.package in TEXT_CHECKED_PACKAGES
    for field, value in message.ListFields():
        path = f"{prefix}{field.name}"
        for where, item in _items(field, value, path):
            found = _item_violation(field, where, item, depth, text)
            if found is not None:
                return found
    return None


def _item_violation(field: FieldDescriptor, where: str, item: Any, depth: int, text: bool) -> tuple[str, str] | None:
    if isinstance(item, str):
        if _is_id_field(field) and len(item) > MAX_ID_CHARS:
            return where, f"is {len(item)} characters long; ids are at most {MAX_ID_CHARS}"
        if text and NUL in item:
            return where, NUL_PROBLEM
        return None
    if not isinstance(item, Message):
        return None
    if item.DESCRIPTOR.full_name in _STRUCT_TYPES:
        problem = struct_problem(item, text=text)  # type: ignore[arg-type]  # one of the three Struct types, by the check above
        return None if problem is None else (f"{where}{problem[0] if problem[0] != '(value)' else ''}", problem[1])
    return _violation_at(item, f"{where}.", depth + 1, text=text)

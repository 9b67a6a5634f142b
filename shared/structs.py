"""Plugin-defined JSON on the wire: dict <-> google.protobuf.Struct.

Struct keeps every number as a double; reading back, integral values become ints again,
so a plugin that wrote `3` reads `3`, not `3.0` (JSON does not tell them apart).

JSON has no NaN or Infinity and plugin data is never deeply nested, so `struct_problem` refuses
both (MAX_DEPTH levels of objects and lists); request checks (shared/request_limits.py) run it on
every Struct a client sends, so such a value is INVALID_ARGUMENT instead of a failure deep inside.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

import msgspec
from google.protobuf import struct_pb2

MAX_DEPTH = 24
_JSON_DECODER = msgspec.json.Decoder()
_JSON_ENCODER = msgspec.json.Encoder()


def ints_back(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {key: ints_back(item) for key, item in value.items()}
    if isinstance(value, list):
        return [ints_back(item) for item in value]
    return value


def to_struct(value: dict[str, Any] | None) -> struct_pb2.Struct:
    message = struct_pb2.Struct()
    if value:
        message.update(value)
    return message


def from_struct(message: struct_pb2.Struct | None) -> dict[str, Any]:
    """The Struct as plain JSON values, integral numbers as ints (read field by field: a hot path of every
    hop, about twice as fast as json_format.MessageToDict followed by ints_back, with the same result)."""
    if message is None:
        return {}
    return {key: _plain(item) for key, item in message.fields.items()}


def _plain(value: struct_pb2.Value) -> Any:
    kind = value.WhichOneof("kind")
    if kind == "string_value":
        return value.string_value
    if kind == "number_value":
        return _json_number(value.number_value)
    if kind == "struct_value":
        return {key: _plain(item) for key, item in value.struct_value.fields.items()}
    if kind == "list_value":
        return [_plain(item) for item in value.list_value.values]
    if kind == "bool_value":
        return value.bool_value
    return None


def _json_number(number: float) -> int | float:
    if number.is_integer() and abs(number) < 2**53:
        return int(number)
    if not math.isfinite(number):
        # As json_format: JSON has no NaN or Infinity (request checks refuse them before this).
        raise ValueError(f"Fail to serialize {number} for Value.number_value")
    return number


def to_value(value: Any) -> struct_pb2.Value:
    """A JSON value as a Value (through Struct.update: three times as fast as json_format.ParseDict; a value JSON
    cannot hold raises TypeError or ValueError)."""
    holder = struct_pb2.Struct()
    holder.update({"v": value})
    message = struct_pb2.Value()
    message.CopyFrom(holder.fields["v"])
    return message


def from_value(message: struct_pb2.Value) -> Any:
    return _plain(message)


NUL = "\x00"
NUL_PROBLEM = "holds a NUL character (U+0000); text cannot contain one"


def struct_problem(
    message: struct_pb2.Struct | struct_pb2.Value | struct_pb2.ListValue, *, text: bool = False
) -> tuple[str, str] | None:
    """(JSON path below the field, what is wrong) for a NaN/Infinity number, nesting past MAX_DEPTH or,
    with `text`, a NUL character in a key or string; else None. Every request's Structs pass here: a first walk
    builds no paths (half the time of one that does), and only a value it finds wrong is walked again for the path."""
    if _fits(message, text):
        return None
    return _problem_at(message, text)


def _fits(message: struct_pb2.Struct | struct_pb2.Value | struct_pb2.ListValue, text: bool) -> bool:
    """struct_problem's checks, without the path: True when nothing is wrong."""
    pending: list[tuple[Any, int]] = [(message, 0)]
    while pending:
        node, depth = pending.pop()
        values: Any
        if type(node) is struct_pb2.Value:
            values, depth = (node,), depth - 1  # a top-level Value: its object or list is at depth 0
        elif depth >= MAX_DEPTH:
            return False
        elif type(node) is struct_pb2.Struct:
            if text and any(NUL in key for key in node.fields):
                return False
            values = node.fields.values()
        else:
            values = node.values
        for value in values:
            kind = value.WhichOneof("kind")
            if kind == "number_value":
                if not math.isfinite(value.number_value):
                    return False
            elif kind == "struct_value" or kind == "list_value":
                pending.append((getattr(value, kind), depth + 1))
            elif text and kind == "string_value" and NUL in value.string_value:
                return False
    return True


def _problem_at(
    message: struct_pb2.Struct | struct_pb2.Value | struct_pb2.ListValue, text: bool
) -> tuple[str, str] | None:
    pending: list[tuple[Any, str, int]] = [(message, "", 0)]
    while pending:
        node, path, depth = pending.pop()
        if isinstance(node, struct_pb2.Value):
            kind = node.WhichOneof("kind")
            if kind == "number_value" and not math.isfinite(node.number_value):
                return path or "(value)", f"is {node.number_value}; JSON numbers are finite (no NaN or Infinity)"
            if text and kind == "string_value" and NUL in node.string_value:
                return path or "(value)", NUL_PROBLEM
            if kind in ("struct_value", "list_value"):
                pending.append((getattr(node, kind), path, depth))
            continue
        if depth >= MAX_DEPTH:
            return path or "(value)", f"nests deeper than {MAX_DEPTH} levels of objects and lists"
        if isinstance(node, struct_pb2.Struct):
            if text and any(NUL in key for key in node.fields):
                return path or "(value)", f"has a key with {NUL_PROBLEM.removeprefix('holds ')}"
            pending.extend((value, f"{path}/{_shown_key(key)}", depth + 1) for key, value in node.fields.items())
        else:
            pending.extend((value, f"{path}/{index}", depth + 1) for index, value in enumerate(node.values))
    return None


def _shown_key(key: str) -> str:
    return key if len(key) <= 40 else f"{key[:20]}…"


def to_json_bytes(value: dict[str, Any]) -> bytes:
    """A JSON object as compact UTF-8 bytes: a payload's `*_json` field (the cheaper twin of to_struct)."""
    return _JSON_ENCODER.encode(value)


def json_object(data: bytes) -> dict[str, Any]:
    """The JSON object a trusted peer sent (a `*_json` field of its answer)."""
    value = _JSON_DECODER.decode(data)
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got a {type(value).__name__}")
    return value


def json_object_problem(data: bytes) -> tuple[dict[str, Any] | None, str]:
    """(the decoded object, "") for bytes that hold one JSON object within the limits a Struct is held to (no NaN
    or Infinity: JSON has neither; at most MAX_DEPTH levels), else (None, what is wrong, with its JSON path)."""
    try:
        value = _JSON_DECODER.decode(data)
    except (msgspec.DecodeError, RecursionError) as error:
        return None, f"is not JSON within its limits ({str(error)[:120]})"
    if not isinstance(value, dict):
        return None, f"is a JSON {type(value).__name__}; send one object"
    pending: list[tuple[Any, str, int]] = [(value, "", 0)]
    while pending:
        node, path, depth = pending.pop()
        if depth >= MAX_DEPTH:
            return None, f"{path or '(value)'} nests deeper than {MAX_DEPTH} levels of objects and lists"
        for key, item in (node.items() if isinstance(node, dict) else enumerate(node)):
            if isinstance(item, (dict, list)):
                pending.append((item, f"{path}/{_shown_key(str(key))}", depth + 1))
    return value, ""


class StructMap(Mapping[str, dict[str, Any]]):
    """A protobuf map of Structs read as dicts, each converted the first time it is asked for: a hook context's
    plugin_settings names every active plugin's, a handler reads its own."""

    def __init__(self, structs: Mapping[str, struct_pb2.Struct]) -> None:
        self._structs = structs
        self._read: dict[str, dict[str, Any]] = {}

    def __getitem__(self, key: str) -> dict[str, Any]:
        found = self._read.get(key)
        if found is None:
            if key not in self._structs:  # (indexing a protobuf map of messages would add the key)
                raise KeyError(key)
            found = self._read[key] = from_struct(self._structs[key])
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self._structs)

    def __len__(self) -> int:
        return len(self._structs)

    def __contains__(self, key: object) -> bool:
        return key in self._structs

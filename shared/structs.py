"""Plugin-defined JSON on the wire: dict <-> google.protobuf.Struct.

Struct keeps every number as a double; reading back, integral values become ints again,
so a plugin that wrote `3` reads `3`, not `3.0` (JSON does not tell them apart).
"""

from __future__ import annotations

from typing import Any

from google.protobuf import json_format, struct_pb2


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
    if message is None:
        return {}
    return ints_back(json_format.MessageToDict(message))


def to_value(value: Any) -> struct_pb2.Value:
    message = struct_pb2.Value()
    json_format.ParseDict(value, message)
    return message


def from_value(message: struct_pb2.Value) -> Any:
    return ints_back(json_format.MessageToDict(message))

"""Hypothesis strategies for any protobuf message, built by walking its descriptor.

Strings mix values the services know (ids, plugin and runtime names, given as `known`) with odd and
huge text, so requests reach past the first lookup; ints sit at their bounds, enums take unknown
numbers, repeated fields are empty or long, Structs carry NaN, Infinity and deep nesting.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from google.protobuf import struct_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from hypothesis import strategies as st

# Messages nest this deep at most (the request guard allows 10); a Struct nests on its own.
MAX_MESSAGE_DEPTH = 4
_INT_BOUNDS = {
    **dict.fromkeys((FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_SINT32, FieldDescriptor.TYPE_SFIXED32), (-(2**31), 2**31 - 1)),
    **dict.fromkeys((FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_SINT64, FieldDescriptor.TYPE_SFIXED64), (-(2**63), 2**63 - 1)),
    **dict.fromkeys((FieldDescriptor.TYPE_UINT32, FieldDescriptor.TYPE_FIXED32), (0, 2**32 - 1)),
    **dict.fromkeys((FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_FIXED64), (0, 2**64 - 1)),
}
ODD_STRINGS = [
    "", " ", "\t\n", "\x00", "a\x00b", "\ufeff", "\u202eevil", "😀" * 3, "日本語", "é", "\U0010ffff",
    "../../etc/passwd", "/etc/passwd", "C:\\Windows", "~root", "$HOME", "%s%n%x", "{}", "[]", "null", "NaN",
    "-1", "0", "1e309", "' OR 1=1 --", "<script>", "a/b/c", "x@1", "@", "narrator/../x", "*", "**/*",
    '{"a": 1}', "[" * 5000 + "]" * 5000, '{"a":' * 2000 + "1" + "}" * 2000, "ipv4:10.0.0.5:50051",
]
# Sampled, not generated: building megabytes from Hypothesis' bytes would be slow.
HUGE_STRINGS = ["i" * 257, "w " * 5000, "x" * 70_000, "é" * 600_000]


@functools.lru_cache(maxsize=None)
def text_strategy(known: tuple[str, ...]) -> st.SearchStrategy[str]:
    # protobuf strings are UTF-8: lone surrogates cannot be sent at all.
    anything = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)
    pieces = [anything, st.sampled_from(ODD_STRINGS), st.sampled_from(HUGE_STRINGS)]
    if known:
        known_values = st.sampled_from(known)
        pieces += [known_values, known_values, st.builds(lambda value, odd: value + odd, known_values, st.sampled_from(ODD_STRINGS))]
    return st.one_of(pieces)


def _json_text(values: st.SearchStrategy[Any]) -> st.SearchStrategy[str]:
    return values.map(lambda value: json.dumps(value, allow_nan=True))


def _nested(leaf: Any, depth: int, as_list: bool) -> Any:
    for level in range(depth):
        leaf = [leaf] if as_list or level % 2 else {"k": leaf}
    return leaf


def json_values(strings: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    """JSON-like values: NaN and Infinity among the numbers, and a few very deep ones."""
    scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True), strings)
    shallow = st.recursive(
        scalars, lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(strings, children, max_size=4)), max_leaves=12
    )
    deep = st.builds(_nested, scalars, st.sampled_from([23, 24, 25, 31, 40, 120]), st.booleans())
    return st.one_of(shallow, shallow, deep)


def _struct_of(value: Any) -> struct_pb2.Struct:
    struct = struct_pb2.Struct()
    struct.update(value if isinstance(value, dict) else {"value": value})
    return struct


def _value_of(value: Any) -> struct_pb2.Value:
    holder = struct_pb2.Struct()
    holder.update({"v": value})
    return holder.fields["v"]


def _list_of(value: Any) -> struct_pb2.ListValue:
    listed = struct_pb2.ListValue()
    listed.extend(value if isinstance(value, list) else [value])
    return listed


_WELL_KNOWN = {"google.protobuf.Struct": _struct_of, "google.protobuf.Value": _value_of, "google.protobuf.ListValue": _list_of}


def _scalar(field: FieldDescriptor, strings: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    kind = field.type
    if kind in _INT_BOUNDS:
        low, high = _INT_BOUNDS[kind]
        edges = sorted({low, low + 1, -1 if low < 0 else 2, 0, 1, high - 1, high})
        return st.one_of(st.sampled_from(edges), st.integers(low, high))
    if kind == FieldDescriptor.TYPE_DOUBLE:
        return st.floats(allow_nan=True, allow_infinity=True)
    if kind == FieldDescriptor.TYPE_FLOAT:
        return st.floats(allow_nan=True, allow_infinity=True, width=32)
    if kind == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if kind == FieldDescriptor.TYPE_ENUM:
        declared = [value.number for value in field.enum_type.values]
        return st.one_of(st.sampled_from(declared), st.integers(-(2**31), 2**31 - 1))
    if kind == FieldDescriptor.TYPE_BYTES:
        return st.one_of(st.binary(max_size=64), st.sampled_from([b"", b"\x00" * 16, b"PK\x03\x04junk", b"\xff" * 70_000]))
    # A text field that carries JSON (tool arguments) gets JSON text as often as plain text.
    return st.one_of(strings, _json_text(json_values(strings)))


def _field_value(field: FieldDescriptor, known: tuple[str, ...], depth: int) -> st.SearchStrategy[Any]:
    """One value of `field` (one element of a repeated field)."""
    strings = text_strategy(known)
    if field.type != FieldDescriptor.TYPE_MESSAGE:
        return _scalar(field, strings)
    name = field.message_type.full_name
    if name in _WELL_KNOWN:
        return json_values(strings).map(_WELL_KNOWN[name])
    return message_strategy(field.message_type, known, depth + 1)


def _repeated(element: st.SearchStrategy[Any], filler: st.SearchStrategy[Any]) -> st.SearchStrategy[list[Any]]:
    """A few elements, or many copies of a small one."""
    many = st.builds(lambda value, count: [value] * count, filler, st.sampled_from([100, 2000]))
    return st.one_of(st.lists(element, max_size=3), many)


@functools.lru_cache(maxsize=None)
def _field_strategy(field: FieldDescriptor, known: tuple[str, ...], depth: int) -> st.SearchStrategy[Any]:
    message_type = field.message_type
    if message_type is not None and message_type.GetOptions().map_entry:
        key_field, value_field = message_type.fields_by_name["key"], message_type.fields_by_name["value"]
        keys = _field_value(key_field, known, depth)
        return st.dictionaries(keys, _field_value(value_field, known, depth), max_size=3)
    element = _field_value(field, known, depth)
    if not field.is_repeated:
        return element
    return _repeated(element, _small_value(field, known))


def _small_value(field: FieldDescriptor, known: tuple[str, ...]) -> st.SearchStrategy[Any]:
    """A value of `field` of a few bytes, to repeat many times."""
    if field.message_type is not None:
        return st.just(GetMessageClass(field.message_type)())
    if field.type == FieldDescriptor.TYPE_STRING:
        return st.one_of(st.sampled_from(known or ("x",)), st.text(max_size=4))
    if field.type == FieldDescriptor.TYPE_BYTES:
        return st.binary(max_size=4)
    return _scalar(field, st.just(""))


def _assign(message: Message, field: FieldDescriptor, value: Any) -> None:
    target = getattr(message, field.name)
    message_type = field.message_type
    if message_type is not None and message_type.GetOptions().map_entry:
        value_is_message = message_type.fields_by_name["value"].message_type is not None
        for key, item in value.items():
            if value_is_message:
                target[key].CopyFrom(item)
            else:
                target[key] = item
    elif field.is_repeated:
        target.extend(value)
    elif message_type is not None:
        target.CopyFrom(value)
    else:
        setattr(message, field.name, value)


@functools.lru_cache(maxsize=None)
def message_strategy(descriptor: Descriptor, known: tuple[str, ...] = (), depth: int = 0) -> st.SearchStrategy[Message]:
    """Messages of type `descriptor`: any subset of fields set, at most one field of each oneof."""
    message_class = GetMessageClass(descriptor)
    fields = [field for field in descriptor.fields if depth < MAX_MESSAGE_DEPTH or field.type != FieldDescriptor.TYPE_MESSAGE]

    @st.composite
    def build(draw: st.DrawFn) -> Message:
        message = message_class()
        chosen = {oneof.name: draw(st.sampled_from([None, *oneof.fields])) for oneof in descriptor.oneofs}
        for field in fields:
            oneof = field.containing_oneof
            if oneof is not None and chosen[oneof.name] is not field:
                continue
            if oneof is None and not draw(st.booleans()):
                continue
            _assign(message, field, draw(_field_strategy(field, known, depth)))
        return message

    return build()

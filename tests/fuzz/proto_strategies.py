"""Hypothesis strategies for any protobuf message, built by walking its descriptor.

Strings mix values the services know (session ids, plugin and runtime names, ...: a Palette's pools,
picked by the field's name) with odd and huge text, so requests reach past the first lookup; ints sit at their bounds, enums take unknown
numbers, repeated fields are empty or long, Structs carry NaN, Infinity and deep nesting. A
non-hostile Palette makes plausible requests instead, which reach the code behind the checks.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
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


# Which pool of known values a string field draws from, by its name.
FIELD_POOLS = (
    ("session_id", "sessions"), ("runtime_id", "runtimes"), ("plugin", "plugins"), ("approve", "plugins"), ("revoke", "plugins"),
    ("contract", "contracts"), ("point", "points"), ("slot", "slots"), ("event", "events"), ("key", "event_keys"),
    ("name", "tools"), ("kind", "action_kinds"), ("locale", "locales"), ("source", "sources"),
)
# String fields that carry JSON text (tool and service arguments).
JSON_TEXT_FIELDS = {"arguments"}


@dataclass(frozen=True)
class Palette:
    """What generated values are made of: `pools` of values the services know (name -> ids), and
    `hostile` values (odd and huge text, bounds, NaN, deep nesting) or plausible ones, which get a
    request past the first checks to the code behind them."""

    pools: tuple[tuple[str, tuple[str, ...]], ...] = ()
    hostile: bool = True

    def known(self, field_name: str = "") -> tuple[str, ...]:
        """The values a field of this name takes from the services; every known value when no pool fits."""
        pools = dict(self.pools)
        for part, pool in FIELD_POOLS:
            if part in field_name and pools.get(pool):
                return pools[pool]
        return tuple(sorted({value for values in pools.values() for value in values})) or ("x",)


@functools.lru_cache(maxsize=None)
def text_strategy(palette: Palette, field_name: str = "") -> st.SearchStrategy[str]:
    known_values = st.sampled_from(palette.known(field_name))
    if not palette.hostile:
        return st.one_of(known_values, known_values, known_values, st.text(st.characters(codec="ascii", min_codepoint=32), max_size=12))
    # protobuf strings are UTF-8: lone surrogates cannot be sent at all.
    anything = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)
    odd_suffix = st.builds(lambda value, odd: value + odd, known_values, st.sampled_from(ODD_STRINGS))
    return st.one_of(anything, st.sampled_from(ODD_STRINGS), st.sampled_from(HUGE_STRINGS), known_values, known_values, odd_suffix)


def _json_text(values: st.SearchStrategy[Any]) -> st.SearchStrategy[str]:
    return values.map(lambda value: json.dumps(value, allow_nan=True))


def _nested(leaf: Any, depth: int, as_list: bool) -> Any:
    for level in range(depth):
        leaf = [leaf] if as_list or level % 2 else {"k": leaf}
    return leaf


def json_values(strings: st.SearchStrategy[str], hostile: bool = True) -> st.SearchStrategy[Any]:
    """JSON-like values; hostile ones with NaN and Infinity among the numbers, and a few very deep ones."""
    numbers = st.floats(allow_nan=hostile, allow_infinity=hostile) if hostile else st.integers(-5, 100)
    scalars = st.one_of(st.none(), st.booleans(), st.integers() if hostile else numbers, numbers, strings)
    shallow = st.recursive(
        scalars, lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(strings, children, max_size=4)), max_leaves=12
    )
    if not hostile:
        return shallow
    deep = st.builds(_nested, scalars, st.sampled_from([23, 24, 25, 31, 40, 120]), st.booleans())
    return st.one_of(shallow, shallow, deep)


@dataclass(frozen=True)
class JsonValue:
    """The value of a Struct, Value or ListValue field, written into the message in place: copying a
    message nested past protobuf's decode limit fails, and such messages are worth sending."""

    value: Any


WELL_KNOWN = ("google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue")


def _fill_json(message: Message, value: Any) -> None:
    kind = message.DESCRIPTOR.full_name
    if kind == "google.protobuf.Struct":
        message.update(value if isinstance(value, dict) else {"value": value})
    elif kind == "google.protobuf.ListValue":
        message.extend(value if isinstance(value, list) else [value])
    elif isinstance(value, dict):
        message.struct_value.SetInParent()
        message.struct_value.update(value)
    elif isinstance(value, list):
        message.list_value.SetInParent()
        message.list_value.extend(value)
    else:
        holder = struct_pb2.Struct()
        holder.update({"v": value})
        message.CopyFrom(holder.fields["v"])


def _plausible_scalar(field: FieldDescriptor, strings: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    kind = field.type
    if kind in _INT_BOUNDS or kind in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return st.integers(0, 100)
    if kind == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if kind == FieldDescriptor.TYPE_ENUM:
        return st.sampled_from([value.number for value in field.enum_type.values])
    if kind == FieldDescriptor.TYPE_BYTES:
        return st.binary(max_size=16)
    if field.name in JSON_TEXT_FIELDS:
        return _json_text(json_values(strings, hostile=False))
    return strings


def _scalar(field: FieldDescriptor, strings: st.SearchStrategy[str], hostile: bool = True) -> st.SearchStrategy[Any]:
    if not hostile:
        return _plausible_scalar(field, strings)
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


def _field_value(field: FieldDescriptor, palette: Palette, depth: int) -> st.SearchStrategy[Any]:
    """One value of `field` (one element of a repeated field)."""
    strings = text_strategy(palette, field.name)
    if field.type != FieldDescriptor.TYPE_MESSAGE:
        return _scalar(field, strings, palette.hostile)
    if field.message_type.full_name in WELL_KNOWN:
        return json_values(strings, palette.hostile).map(JsonValue)
    return _spec_strategy(field.message_type, palette, depth + 1)


def _repeated(element: st.SearchStrategy[Any], filler: st.SearchStrategy[Any]) -> st.SearchStrategy[list[Any]]:
    """A few elements, or many copies of a small one."""
    many = st.builds(lambda value, count: [value] * count, filler, st.sampled_from([100, 2000]))
    return st.one_of(st.lists(element, max_size=3), many)


@functools.lru_cache(maxsize=None)
def _field_strategy(field: FieldDescriptor, palette: Palette, depth: int) -> st.SearchStrategy[Any]:
    message_type = field.message_type
    if message_type is not None and message_type.GetOptions().map_entry:
        key_field, value_field = message_type.fields_by_name["key"], message_type.fields_by_name["value"]
        # Map keys name what the map is of (plugin_settings: plugin ids).
        keys = text_strategy(palette, field.name) if key_field.type == FieldDescriptor.TYPE_STRING else _field_value(key_field, palette, depth)
        return st.dictionaries(keys, _field_value(value_field, palette, depth), max_size=3)
    element = _field_value(field, palette, depth)
    if not field.is_repeated:
        return element
    if not palette.hostile:
        return st.lists(element, max_size=3)
    return _repeated(element, _small_value(field, palette.known(field.name)))


def _small_value(field: FieldDescriptor, known: tuple[str, ...]) -> st.SearchStrategy[Any]:
    """A value of `field` of a few bytes, to repeat many times."""
    if field.message_type is not None:
        return st.just(JsonValue({}) if field.message_type.full_name in WELL_KNOWN else {})
    if field.type == FieldDescriptor.TYPE_STRING:
        return st.one_of(st.sampled_from(known or ("x",)), st.text(max_size=4))
    if field.type == FieldDescriptor.TYPE_BYTES:
        return st.binary(max_size=4)
    return _scalar(field, st.just(""))


def _place(message: Message, value: Any) -> None:
    if isinstance(value, JsonValue):
        _fill_json(message, value.value)
    else:
        message.SetInParent()
        _fill(message, value)


def _fill(message: Message, spec: dict[str, Any]) -> None:
    """Set `message`'s fields from `spec` (field name -> value; a message field's value is its own spec), in place."""
    for name, value in spec.items():
        field = message.DESCRIPTOR.fields_by_name[name]
        target = getattr(message, name)
        message_type = field.message_type
        if message_type is not None and message_type.GetOptions().map_entry:
            value_is_message = message_type.fields_by_name["value"].message_type is not None
            for key, item in value.items():
                if value_is_message:
                    _place(target[key], item)
                else:
                    target[key] = item
        elif field.is_repeated and message_type is not None:
            for item in value:
                _place(target.add(), item)
        elif field.is_repeated:
            target.extend(value)
        elif message_type is not None:
            _place(target, value)
        else:
            setattr(message, name, value)


@functools.lru_cache(maxsize=None)
def _spec_strategy(descriptor: Descriptor, palette: Palette, depth: int) -> st.SearchStrategy[dict[str, Any]]:
    """Specs of `descriptor` messages: any subset of fields set, at most one field of each oneof."""
    fields = [field for field in descriptor.fields if depth < MAX_MESSAGE_DEPTH or field.type != FieldDescriptor.TYPE_MESSAGE]

    @st.composite
    def spec(draw: st.DrawFn) -> dict[str, Any]:
        chosen = {oneof.name: draw(st.sampled_from([None, *oneof.fields])) for oneof in descriptor.oneofs}
        values: dict[str, Any] = {}
        for field in fields:
            oneof = field.containing_oneof
            if oneof is not None and chosen[oneof.name] is not field:
                continue
            # A plausible request sets most fields: its required ones among them.
            if oneof is None and draw(st.integers(0, 9)) >= (5 if palette.hostile else 9):
                continue
            values[field.name] = draw(_field_strategy(field, palette, depth))
        return values

    return spec()


def _built(descriptor: Descriptor, spec: dict[str, Any]) -> Message:
    message = GetMessageClass(descriptor)()
    _fill(message, spec)
    return message


@functools.lru_cache(maxsize=None)
def message_strategy(descriptor: Descriptor, palette: Palette = Palette()) -> st.SearchStrategy[Message]:
    """Messages of type `descriptor`, built from generated specs."""
    return _spec_strategy(descriptor, palette, 0).map(functools.partial(_built, descriptor))

"""shared/structs.py reads Structs field by field: the same values as protobuf's own JSON mapping (with integral
numbers as ints), for any JSON a plugin may write."""

from __future__ import annotations

import math

import pytest
from google.protobuf import json_format, struct_pb2
from hypothesis import given
from hypothesis import strategies as st

from shared.structs import from_struct, from_value, ints_back, to_struct, to_value
from tests.support.json_payloads import PAYLOADS

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**53), max_value=2**53) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@given(st.dictionaries(st.text(max_size=8), JSON, max_size=5))
def test_from_struct_is_protobufs_json_mapping_with_ints(value) -> None:
    message = to_struct(value)
    assert from_struct(message) == ints_back(json_format.MessageToDict(message))


@given(JSON)
def test_from_value_is_protobufs_json_mapping_with_ints(value) -> None:
    message = to_value(value)
    assert from_value(message) == ints_back(json_format.MessageToDict(message))
    parsed = struct_pb2.Value()
    json_format.ParseDict(value, parsed)
    assert message == parsed, "to_value builds what protobuf's JSON parser builds"


def test_integral_numbers_come_back_as_ints_and_an_unset_value_as_null() -> None:
    assert from_struct(to_struct({"n": 3, "f": 1.5, "big": 2.0**60, "list": [1, 2.0, True]})) == {
        "n": 3, "f": 1.5, "big": 2.0**60, "list": [1, 2, True]}
    assert from_value(struct_pb2.Value()) is None and from_struct(None) == {}




@pytest.mark.parametrize("payload", PAYLOADS)
def test_types_are_as_json_reads_them(payload) -> None:
    message = to_struct(payload)
    mapped = ints_back(json_format.MessageToDict(message))
    assert from_struct(message) == mapped and [type(v) for v in from_struct(message).values()] == [type(v) for v in mapped.values()]


@pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf])
def test_what_json_cannot_say_is_refused(number) -> None:
    message = struct_pb2.Struct()
    message.fields["x"].number_value = number
    with pytest.raises(ValueError):
        from_struct(message)
    with pytest.raises(ValueError):
        from_value(message.fields["x"])

"""struct_problem (every request's Structs): its first walk, which builds no paths, finds exactly what the walk
with paths finds, whatever the value, so each request gets the same answer as before."""

from __future__ import annotations

import math

import pytest
from google.protobuf import struct_pb2

from shared.structs import MAX_DEPTH, NUL, _problem_at, struct_problem, to_struct, to_value


def nested(levels: int, leaf: object = 1) -> object:
    value = leaf
    for index in range(levels):
        value = {"k": value} if index % 2 else [value]
    return value


def as_list(value: list) -> struct_pb2.ListValue:
    return to_value(value).list_value


VALUES = [
    {}, {"a": 1, "b": [1, 2.5, "x", None, True, {"c": []}]},
    {"n": math.nan}, {"deep": [{"x": [math.inf]}]}, {"ok": 1e308, "bad": -math.inf},
    {"text": f"a{NUL}b"}, {f"key{NUL}": 1}, {"list": [f"{NUL}"]},
    nested(MAX_DEPTH - 1), nested(MAX_DEPTH), nested(MAX_DEPTH + 1), {"w": nested(MAX_DEPTH - 1)},
    {"w": nested(MAX_DEPTH)}, nested(MAX_DEPTH - 1, math.nan), [1, [2, [math.nan]]], [], "plain", 3.0, math.nan, None,
]


def messages(value: object) -> list[struct_pb2.Struct | struct_pb2.Value | struct_pb2.ListValue]:
    found: list[struct_pb2.Struct | struct_pb2.Value | struct_pb2.ListValue] = [to_value(value)]
    if isinstance(value, dict):
        found.append(to_struct(value))
    if isinstance(value, list):
        found.append(as_list(value))
    return found


@pytest.mark.parametrize("text", [False, True])
@pytest.mark.parametrize("index", range(len(VALUES)))
def test_the_quick_walk_answers_as_the_walk_with_paths(index: int, text: bool) -> None:
    for message in messages(VALUES[index]):
        assert struct_problem(message, text=text) == _problem_at(message, text)


def test_what_each_walk_finds() -> None:
    assert struct_problem(to_struct({"deep": [{"x": [math.inf]}]})) == (
        "/deep/0/x/0", "is inf; JSON numbers are finite (no NaN or Infinity)")
    assert struct_problem(to_struct({"t": f"a{NUL}"})) is None
    assert struct_problem(to_struct({"t": f"a{NUL}"}), text=True) == ("/t", "holds a NUL character (U+0000); text cannot contain one")
    assert struct_problem(to_value(nested(MAX_DEPTH))) is None
    assert struct_problem(to_value(nested(MAX_DEPTH + 1)))[1] == f"nests deeper than {MAX_DEPTH} levels of objects and lists"

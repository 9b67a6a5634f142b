"""The checks every request meets (shared/request_limits.py, shared/structs.py struct_problem): their first walks,
which build no paths, find exactly what the walks with paths find, so each request gets the same answer as before."""

from __future__ import annotations

import math

import pytest
from google.protobuf import struct_pb2
from google.protobuf.message import Message

from shared.request_limits import MAX_ID_CHARS, _violation_at, request_violation
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


def request_cases() -> list[Message]:
    """Requests of both kinds (the client API's, whose text is checked for NUL, and an internal one's), each
    clean and with one thing wrong in each place a check looks: ids, text, map values, Structs, nested messages."""
    from covel.scheduler.v1 import resources_pb2, scheduler_pb2
    from covel.store.v1 import store_pb2

    def submit(**action: object) -> scheduler_pb2.SubmitActionsRequest:
        return scheduler_pb2.SubmitActionsRequest(session_id="s", actions=[resources_pb2.PlayerAction(kind="say", text="hi"),
                                                                           resources_pb2.PlayerAction(**action)])

    def commit(payload: dict, **fields: object) -> store_pb2.CommitTurnRequest:
        return store_pb2.CommitTurnRequest(session_id="s", proposals=[
            store_pb2.Proposal(id="p1", type="plugin.data", payload=to_struct({"ok": 1})),
            store_pb2.Proposal(id="p2", type="plugin.data", payload=to_struct(payload), **fields)])

    long_id = "x" * (MAX_ID_CHARS + 1)
    return [
        submit(kind="do", text="fine", fields=to_struct({"a": [1, "b"]})), submit(text=f"a{NUL}"), submit(actor_id=long_id),
        submit(fields=to_struct({"n": math.nan})), submit(fields=to_struct({f"k{NUL}": 1})), submit(seat_id=f"s{NUL}"),
        scheduler_pb2.SubmitActionsRequest(session_id=long_id),
        scheduler_pb2.CreateSessionRequest(requested_plugins=["a", f"b{NUL}"], plugin_settings={"p": to_struct({"v": math.inf})}),
        scheduler_pb2.CreateSessionRequest(plugin_settings={"p": to_struct({"v": 1}), "q": to_struct({"w": f"{NUL}"})}),
        scheduler_pb2.CreateSessionRequest(plugin_settings={"p": to_struct({"v": 1})}),
        commit({"text": f"a{NUL}"}), commit({"deep": nested(MAX_DEPTH + 1)}), commit({"x": -math.inf}), commit({}, runtime_id=long_id),
        commit({}, plugin_id=f"p{NUL}"), store_pb2.CommitTurnRequest(session_id="s", lease_id=long_id),
        store_pb2.Session(id="s", runtime_model_overrides={"r": f"m{NUL}", "q": long_id}, plugin_settings={"p": to_struct({"n": math.nan})}),
        store_pb2.Session(id="s", runtime_model_overrides={"r": "m"}),
    ]


def test_a_request_is_answered_as_by_the_walk_with_paths() -> None:
    """request_violation's first walk (no paths, fields that cannot be wrong skipped) against the walk with paths."""
    answers = []
    for request in request_cases():
        answer = request_violation(request)
        assert answer == _violation_at(request), request
        answers.append(answer)
    assert answers[0] is None and answers[-1] is None and sum(answer is not None for answer in answers) >= 12
    assert answers[1] == ("actions[1].text", "holds a NUL character (U+0000); text cannot contain one")

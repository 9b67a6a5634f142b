"""Declarative hook matches on the wire (hooks.proto HandlerMatch): the hooks service reports them in
GetSubscriptions, and the scheduler tests them before it dispatches (services/scheduler/hooks/bus.py)."""

from __future__ import annotations

from google.protobuf import struct_pb2

from covel.hooks.v1 import hooks_pb2
from shared.plugin_sdk.hook_match import DeclarativeMatch
from shared.structs import from_value


def match_to_proto(match: DeclarativeMatch) -> hooks_pb2.HandlerMatch:
    conditions = []
    for path, accepted in match.spec().items():
        any_of = struct_pb2.ListValue()
        any_of.extend(accepted)
        conditions.append(hooks_pb2.MatchCondition(path=path, any_of=any_of))
    return hooks_pb2.HandlerMatch(conditions=conditions)


def match_from_proto(message: hooks_pb2.HandlerMatch) -> DeclarativeMatch:
    """The match back (MatchError if the hooks service sent one that is not: a caller then dispatches)."""
    return DeclarativeMatch.parse({
        condition.path: [from_value(value) for value in condition.any_of.values] for condition in message.conditions
    })

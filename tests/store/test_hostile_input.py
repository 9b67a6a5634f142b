"""Hostile input at the store (issue 18 item 5), on both backends: a catastrophic dataset pattern
no longer holds every commit, and NaN, over-deep values and huge ids are INVALID_ARGUMENT."""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any

import grpc

from covel.store.v1 import store_pb2
from shared.structs import to_struct
from tests.store.helpers import commit_turn, expect_error, new_session, outcomes_by_id, proposal, violated_fields

REJECTED = store_pb2.PROPOSAL_STATUS_REJECTED
COMMITTED = store_pb2.PROPOSAL_STATUS_COMMITTED
# On Python's backtracking engine, 30 a's and a b take about 20 s against this pattern.
CATASTROPHIC = {
    "type": "object",
    "properties": {"name": {"type": "string", "pattern": "^(a+)+$"}},
    "patternProperties": {"^(x+x+)+y$": {"type": "integer"}},
    "additionalProperties": {"type": "string", "pattern": "^(b|b)+$"},
}


PROPOSALS_FIELD = store_pb2.CommitTurnRequest.DESCRIPTOR.fields_by_name["proposals"].number
PAYLOAD_FIELD = store_pb2.Proposal.DESCRIPTOR.fields_by_name["payload"].number


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def embedded(field_number: int, data: bytes) -> bytes:
    """A length-delimited field on the wire: appended to a message's bytes, protobuf merges it in."""
    return varint(field_number << 3 | 2) + varint(len(data)) + data


def nested(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(levels - 1):
        value = {"deeper": value}
    return value


async def test_a_catastrophic_dataset_pattern_is_checked_in_linear_time(stub) -> None:
    session, bystander = await new_session(stub), await new_session(stub)
    datasets = [store_pb2.DatasetPolicy(plugin_id="memory", namespace="names", schema=to_struct(CATASTROPHIC))]
    hostile = {"name": "a" * 5000 + "b", "x" * 5000: "not an integer", "other": "b" * 5000 + "c"}
    started = time.monotonic()
    bad = proposal("plugin.data", {"namespace": "names", "key": "k", "value": hostile})
    # A commit on another session runs meanwhile: it must not wait behind the pattern.
    reply, other = await asyncio.gather(commit_turn(stub, session.id, [bad], datasets=datasets), commit_turn(stub, bystander.id))
    assert time.monotonic() - started < 5
    outcome = outcomes_by_id(reply.turn)[bad.id]
    assert (outcome.status, outcome.code) == (REJECTED, "dataset-violation")
    assert "does not match '^(a+)+$'" in outcome.reason and len(outcome.reason) < 1000  # the 5000 a's are not echoed
    assert other.turn.status == store_pb2.TURN_STATUS_COMMITTED
    good = proposal("plugin.data", {"namespace": "names", "key": "k", "value": {"name": "aaa", "xxy": 3, "other": "bb"}})
    reply = await commit_turn(stub, session.id, [good], datasets=datasets)
    assert outcomes_by_id(reply.turn)[good.id].status == COMMITTED


async def test_a_pattern_re2_cannot_run_is_a_clear_violation(stub) -> None:
    session = await new_session(stub)
    schema = {"type": "object", "properties": {"word": {"type": "string", "pattern": "^(a)\\1$"}}}
    datasets = [store_pb2.DatasetPolicy(plugin_id="memory", namespace="words", schema=to_struct(schema))]
    item = proposal("plugin.data", {"namespace": "words", "key": "k", "value": {"word": "aa"}})
    outcome = outcomes_by_id((await commit_turn(stub, session.id, [item], datasets=datasets)).turn)[item.id]
    assert (outcome.status, outcome.code) == (REJECTED, "dataset-violation")
    assert "not supported" in outcome.reason and "backreferences" in outcome.reason


async def test_nan_infinity_and_over_deep_values_are_invalid_argument(stub) -> None:
    for value, where, says in (
        ({"hp": math.nan}, "proposals[1].payload/value/hp", "NaN or Infinity"),
        ({"list": [1, -math.inf]}, "proposals[1].payload/value/list/1", "NaN or Infinity"),
        (nested(30), "proposals[1].payload/value", "nests deeper than 24"),
    ):
        session = await new_session(stub)  # a refused commit leaves its lease held until it lapses
        call = commit_turn(stub, session.id, [proposal("plugin.data", {"namespace": "n", "key": "k", "value": value})])
        error = await expect_error(grpc.StatusCode.INVALID_ARGUMENT, call)
        [field] = violated_fields(error)
        assert field.startswith(where) and says in error.details(), (field, error.details())


async def test_a_request_nested_past_protobufs_limit_is_invalid_argument(store, stub) -> None:
    # protobuf refuses to build such a message, so its bytes are put together by hand: the store
    # cannot decode it at all (before: INTERNAL from inside gRPC).
    session = await new_session(stub)
    lease = (await stub.AcquireTurnLease(store_pb2.AcquireTurnLeaseRequest(session_id=session.id, holder="test"))).lease
    deep = to_struct({"namespace": "n", "key": "k", "value": nested(60)}).SerializeToString()
    shallow = proposal("plugin.data", {})
    shallow.ClearField("payload")
    request = store_pb2.CommitTurnRequest(session_id=session.id, lease_id=lease.lease_id, release_lease=True)
    raw = request.SerializeToString() + embedded(PROPOSALS_FIELD, shallow.SerializeToString() + embedded(PAYLOAD_FIELD, deep))
    commit = store.channel.unary_unary("/covel.store.v1.TransactionalStore/CommitTurn", response_deserializer=store_pb2.CommitTurnResponse.FromString)
    error = await expect_error(grpc.StatusCode.INVALID_ARGUMENT, commit(raw))
    assert violated_fields(error) == ["request"] and "nests too deeply" in error.details()
    # The store is unharmed: the next commit goes through.
    assert (await commit_turn(stub, (await new_session(stub)).id)).turn.status == store_pb2.TURN_STATUS_COMMITTED


async def test_huge_ids_are_refused_and_never_echoed(stub) -> None:
    huge = "s" * 1_000_000
    error = await expect_error(grpc.StatusCode.INVALID_ARGUMENT, stub.GetSession(store_pb2.GetSessionRequest(session_id=huge)))
    assert violated_fields(error) == ["session_id"] and len(error.details()) < 300
    error = await expect_error(grpc.StatusCode.NOT_FOUND, stub.GetSession(store_pb2.GetSessionRequest(session_id="t" * 200)))
    assert "t" * 200 not in error.details() and "(200 characters)" in error.details()

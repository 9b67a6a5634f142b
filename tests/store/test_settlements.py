"""Dimension settlement receipts (store.proto DimensionSettlement), on both backends: what a commit's
duties leave, retries, the world's pending receipts, ListSettlements and ResolveSettlement."""

from __future__ import annotations

from typing import Any

import grpc
from sqlalchemy import func, select

from covel.store.v1 import store_pb2
from services.store.database import create_store_engine
from services.store.models import DimensionSettlementRow
from shared.structs import from_struct, to_struct
from tests.store.helpers import (
    acquire,
    commit_turn,
    expect_error,
    new_session,
    outcomes_by_id,
    proposal,
    story_proposal,
    story_result,
    turn_for,
    violated_fields,
)

COMMITTED = store_pb2.PROPOSAL_STATUS_COMMITTED
REJECTED = store_pb2.PROPOSAL_STATUS_REJECTED
OWNER = "world-state"
MAINTAINER = "keeper"
INPUT = {"inputs": {"story": "The tide turns.", "turn": 3}}


def duty(runtime_id: str = MAINTAINER, plugin_id: str = OWNER, error: str = "", retry_from: str = "", **input_: Any) -> store_pb2.SettlementDuty:
    return store_pb2.SettlementDuty(plugin_id=plugin_id, runtime_id=runtime_id, input=to_struct(input_ or INPUT), error=error,
                                    retry_from_turn_id=retry_from)


def update(updates: list[dict[str, Any]], runtime_id: str = MAINTAINER, plugin_id: str = OWNER) -> store_pb2.Proposal:
    return proposal("dimension.update", {"updates": updates}, plugin_id=plugin_id, runtime_id=runtime_id)


async def session_with_clock(stub) -> str:
    session = await new_session(stub)
    clock = {"id": "clock", "name": "Clock", "schema": {"type": "integer", "minimum": 0}, "value": 0}
    init = proposal("dimension.initialize", {"dimensions": [clock]}, plugin_id=OWNER, runtime_id="init")
    assert outcomes_by_id((await commit_turn(stub, session.id, [init], dimension_owners=[OWNER])).turn)[init.id].status == COMMITTED
    return session.id


async def settle_turn(stub, session_id: str, proposals=(), duties=()) -> store_pb2.CommitTurnResponse:
    return await commit_turn(stub, session_id, list(proposals), dimension_owners=[OWNER], settlements=list(duties))


def settlement_trace(turn: store_pb2.Turn) -> list[dict[str, Any]]:
    return [entry for entry in map(from_struct, turn.trace) if entry.get("code") == "dimension-settlement"]


async def listed(stub, session_id: str, include_closed: bool = False) -> list[store_pb2.DimensionSettlement]:
    request = store_pb2.ListSettlementsRequest(session_id=session_id, include_closed=include_closed)
    return list((await stub.ListSettlements(request)).settlements)


def resolve(stub, session_id: str, source_turn_id: str, resolution: str, runtime_id: str = MAINTAINER):
    return stub.ResolveSettlement(store_pb2.ResolveSettlementRequest(
        session_id=session_id, source_turn_id=source_turn_id, runtime_id=runtime_id, resolution=resolution))


async def test_a_maintainer_that_committed_an_update_leaves_no_receipt(stub):
    session_id = await session_with_clock(stub)
    moved = update([{"id": "clock", "value": 1, "expectedVersion": 1}])
    unchanged = update([], runtime_id="idle")
    reply = await settle_turn(stub, session_id, [moved, unchanged], [duty(), duty("idle")])
    outcomes = outcomes_by_id(reply.turn)
    assert outcomes[moved.id].status == COMMITTED and outcomes[unchanged.id].status == COMMITTED
    assert await listed(stub, session_id, include_closed=True) == []
    trace = settlement_trace(reply.turn)
    assert [(entry["runtimeId"], entry["pluginId"], entry["state"]) for entry in trace] == [(MAINTAINER, OWNER, "settled"), ("idle", OWNER, "settled")]
    assert all("error" not in entry and "retryFromTurnId" not in entry for entry in trace)
    # The trace is kept with the turn: a read returns the same entries.
    read = (await stub.GetTurn(store_pb2.GetTurnRequest(session_id=session_id, turn_id=reply.turn.id))).turn
    assert settlement_trace(read) == trace


async def test_a_failed_maintainer_keeps_a_pending_receipt_with_its_error_and_input(stub):
    session_id = await session_with_clock(stub)
    reply = await settle_turn(stub, session_id, duties=[duty(error="the model timed out"), duty("silent")])
    receipts = await listed(stub, session_id)
    assert [(r.runtime_id, r.plugin_id, r.status, r.last_error, r.attempts, r.source_turn_id, r.source_logical_turn, r.resolved_turn_id)
            for r in receipts] == [
        (MAINTAINER, OWNER, "pending", "the model timed out", 0, reply.turn.id, reply.turn.logical_turn, ""),
        ("silent", OWNER, "pending", "it finished without calling update-dimensions", 0, reply.turn.id, reply.turn.logical_turn, ""),
    ]
    assert from_struct(receipts[0].input) == INPUT
    assert receipts[0].HasField("created_at") and receipts[0].updated_at == receipts[0].created_at
    trace = settlement_trace(reply.turn)
    assert [(entry["runtimeId"], entry["state"], entry["error"]) for entry in trace] == [
        (MAINTAINER, "pending", "the model timed out"), ("silent", "pending", "it finished without calling update-dimensions")]


async def test_a_rejected_update_leaves_a_receipt_with_the_rejection(stub):
    session_id = await session_with_clock(stub)
    stale = update([{"id": "clock", "value": 4, "expectedVersion": 9}])
    reply = await settle_turn(stub, session_id, [stale], [duty()])
    outcome = outcomes_by_id(reply.turn)[stale.id]
    assert (outcome.status, outcome.code) == (REJECTED, "version-conflict")
    [receipt] = await listed(stub, session_id)
    assert receipt.status == "pending" and receipt.last_error == outcome.reason and "version" in receipt.last_error
    # The maintainer's own error, when the scheduler sent one, says more than the rejection.
    again = update([{"id": "clock", "value": 4, "expectedVersion": 9}], runtime_id="other")
    await settle_turn(stub, session_id, [again], [duty("other", error="update-dimensions failed twice")])
    assert [r.last_error for r in await listed(stub, session_id) if r.runtime_id == "other"] == ["update-dimensions failed twice"]


async def test_a_turn_that_does_not_commit_records_no_duty(stub):
    session_id = await session_with_clock(stub)
    lease = (await acquire(stub, session_id)).lease
    turn = turn_for(lease, status=store_pb2.TURN_STATUS_ABORTED, abort_reason="cancelled")
    await stub.CommitTurn(store_pb2.CommitTurnRequest(session_id=session_id, lease_id=lease.lease_id, turn=turn, release_lease=True,
                                                      settlements=[duty(error="cancelled")]))
    # A story rejection fails the turn: nothing either.
    bad_story = story_proposal("x")
    bad_story.payload.CopyFrom(to_struct({}))
    reply = await commit_turn(stub, session_id, [bad_story], story="", settlements=[duty()])
    assert reply.turn.status == store_pb2.TURN_STATUS_FAILED
    assert await listed(stub, session_id, include_closed=True) == []


async def test_a_retried_commit_records_its_duties_once(stub):
    session_id = await session_with_clock(stub)
    lease = (await acquire(stub, session_id)).lease
    request = store_pb2.CommitTurnRequest(
        session_id=session_id, lease_id=lease.lease_id, release_lease=True, settlements=[duty(error="boom")],
        turn=turn_for(lease, runtime_results=[story_result()]), proposals=[story_proposal("The tide turns.")])
    first = await stub.CommitTurn(request)
    second = await stub.CommitTurn(request)
    assert second.turn.id == first.turn.id and settlement_trace(second.turn) == settlement_trace(first.turn)
    assert [r.source_turn_id for r in await listed(stub, session_id)] == [first.turn.id]


async def test_a_retry_that_settles_closes_the_receipt_and_one_that_fails_counts_an_attempt(stub):
    session_id = await session_with_clock(stub)
    source = (await settle_turn(stub, session_id, duties=[duty(error="first failure"), duty("second")])).turn

    failed = await settle_turn(stub, session_id, duties=[duty(error="still failing", retry_from=source.id)])
    [entry] = settlement_trace(failed.turn)
    assert (entry["state"], entry["retryFromTurnId"], entry["attempts"], entry["error"]) == ("pending", source.id, 1, "still failing")
    by_runtime = {r.runtime_id: r for r in await listed(stub, session_id)}
    assert (by_runtime[MAINTAINER].attempts, by_runtime[MAINTAINER].last_error, by_runtime[MAINTAINER].status) == (1, "still failing", "pending")
    assert by_runtime[MAINTAINER].updated_at.ToDatetime() > by_runtime[MAINTAINER].created_at.ToDatetime()

    settled = update([], runtime_id=MAINTAINER)
    retry = await settle_turn(stub, session_id, [settled], [duty(retry_from=source.id)])
    [entry] = settlement_trace(retry.turn)
    assert (entry["state"], entry["retryFromTurnId"], entry["attempts"]) == ("settled", source.id, 2)
    pending = await listed(stub, session_id)
    assert [r.runtime_id for r in pending] == ["second"]
    closed = [r for r in await listed(stub, session_id, include_closed=True) if r.runtime_id == MAINTAINER]
    assert [(r.status, r.resolved_turn_id, r.attempts, r.source_turn_id) for r in closed] == [("settled", retry.turn.id, 2, source.id)]

    # A retry that settles on its first attempt.
    moved = update([{"id": "clock", "value": 2, "expectedVersion": 1}], runtime_id="second")
    closing = await settle_turn(stub, session_id, [moved], [duty("second", retry_from=source.id)])
    [second] = [r for r in await listed(stub, session_id, include_closed=True) if r.runtime_id == "second"]
    assert (second.status, second.resolved_turn_id, second.attempts) == ("settled", closing.turn.id, 1)

    # A retry of a closed or unknown receipt changes nothing and says so.
    late = await settle_turn(stub, session_id, duties=[duty(error="x", retry_from=source.id), duty(retry_from="no-such-turn")])
    assert [(entry["state"], entry["retryFromTurnId"]) for entry in settlement_trace(late.turn)] == [
        ("ignored", source.id), ("ignored", "no-such-turn")]
    assert await listed(stub, session_id) == []
    assert [(r.status, r.attempts) for r in await listed(stub, session_id, include_closed=True) if r.runtime_id == MAINTAINER] == [("settled", 2)]


async def test_the_world_lists_pending_receipts_oldest_first(stub):
    session_id = await session_with_clock(stub)
    older = (await settle_turn(stub, session_id, duties=[duty(error="one")])).turn
    newer = (await settle_turn(stub, session_id, duties=[duty(error="two")])).turn
    await settle_turn(stub, session_id, [update([])], [duty()])  # settled: no receipt
    world = await stub.GetWorld(store_pb2.GetWorldRequest(session_id=session_id))
    assert [(s.source_turn_id, s.last_error) for s in world.pending_settlements] == [(older.id, "one"), (newer.id, "two")]
    assert [d.id for d in world.dimensions] == ["clock"]
    reply = await acquire(stub, session_id, reads=store_pb2.TurnReads(world=True), ttl_ms=30_000)
    try:
        assert list(reply.world.pending_settlements) == list(world.pending_settlements)
    finally:
        await stub.ReleaseTurnLease(store_pb2.ReleaseTurnLeaseRequest(session_id=session_id, lease_id=reply.lease.lease_id))
    await resolve(stub, session_id, older.id, "skipped")
    world = await stub.GetWorld(store_pb2.GetWorldRequest(session_id=session_id))
    assert [s.source_turn_id for s in world.pending_settlements] == [newer.id]


async def test_resolve_closes_an_open_receipt_once(stub):
    session_id = await session_with_clock(stub)
    first = (await settle_turn(stub, session_id, duties=[duty(error="one")])).turn
    second = (await settle_turn(stub, session_id, duties=[duty(error="two")])).turn
    third = (await settle_turn(stub, session_id, duties=[duty(error="three")])).turn

    handled = (await resolve(stub, session_id, first.id, "handled")).settlement
    assert (handled.status, handled.source_turn_id, handled.last_error, handled.resolved_turn_id) == ("handled", first.id, "one", "")
    assert handled.updated_at.ToDatetime() >= handled.created_at.ToDatetime()
    skipped = (await resolve(stub, session_id, second.id, "skipped")).settlement
    assert skipped.status == "skipped"

    error = await expect_error(grpc.StatusCode.FAILED_PRECONDITION, resolve(stub, session_id, first.id, "skipped"))
    assert "handled" in error.details()
    error = await expect_error(grpc.StatusCode.NOT_FOUND, resolve(stub, session_id, first.id, "handled", runtime_id="nobody"))
    assert first.id in error.details() and "nobody" in error.details()
    for bad in ("retry", "bogus", ""):
        error = await expect_error(grpc.StatusCode.INVALID_ARGUMENT, resolve(stub, session_id, third.id, bad))
        assert violated_fields(error) == ["resolution"] and "handled or skipped" in error.details()
    assert "scheduler" in error.details()

    # Open ones first (oldest first), then the closed ones newest first.
    assert [(r.source_turn_id, r.status) for r in await listed(stub, session_id, include_closed=True)] == [
        (third.id, "pending"), (second.id, "skipped"), (first.id, "handled")]
    assert [r.source_turn_id for r in await listed(stub, session_id)] == [third.id]


async def test_requests_name_their_bad_fields(stub):
    session_id = await session_with_clock(stub)
    await expect_error(grpc.StatusCode.NOT_FOUND, stub.ListSettlements(store_pb2.ListSettlementsRequest(session_id="no-such-session")))
    error = await expect_error(grpc.StatusCode.INVALID_ARGUMENT, stub.ListSettlements(store_pb2.ListSettlementsRequest()))
    assert violated_fields(error) == ["session_id"]
    error = await expect_error(grpc.StatusCode.INVALID_ARGUMENT, resolve(stub, session_id, "", "handled"))
    assert violated_fields(error) == ["source_turn_id"]
    await expect_error(grpc.StatusCode.NOT_FOUND, resolve(stub, "no-such-session", "t", "handled"))
    # (A refused commit leaves its lease held: each in a session of its own.)
    cases = [([duty(runtime_id="")], "settlements[0].runtime_id"), ([duty(plugin_id="")], "settlements[0].plugin_id"),
             ([duty(), duty()], "settlements[1].runtime_id")]
    for duties, field in cases:
        error = await expect_error(grpc.StatusCode.INVALID_ARGUMENT, settle_turn(stub, (await new_session(stub)).id, duties=duties))
        assert violated_fields(error) == [field]


async def test_deleting_the_session_removes_its_receipts(store):
    stub = store.stub
    session_id = await session_with_clock(stub)
    await settle_turn(stub, session_id, duties=[duty(error="one"), duty("other")])
    assert len(await listed(stub, session_id)) == 2
    await stub.EndSession(store_pb2.EndSessionRequest(session_id=session_id, reason="deleted"))
    await expect_error(grpc.StatusCode.NOT_FOUND, stub.ListSettlements(store_pb2.ListSettlementsRequest(session_id=session_id)))
    settings = store.settings
    engine = create_store_engine(settings.database_url(), schema=settings.store_database_schema, pool_size=1)
    try:
        with engine.connect() as connection:
            count = select(func.count()).select_from(DimensionSettlementRow).where(DimensionSettlementRow.session_id == session_id)
            assert connection.execute(count).scalar_one() == 0
    finally:
        engine.dispose()

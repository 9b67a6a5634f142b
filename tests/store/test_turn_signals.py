"""Signals to a running turn: only while a lease is live, taken once, only by the lease holder."""

from __future__ import annotations

import asyncio

import grpc
from sqlalchemy import func, select

from covel.store.v1 import store_pb2
from services.store import validation
from services.store.database import create_store_engine
from services.store.models import TurnSignalRow
from tests.store.helpers import acquire, commit, expect_error, new_session, play_turn, turn_for, violated_fields


def signal(stub, session_id: str, kind: str, **fields):
    return stub.SignalTurn(store_pb2.SignalTurnRequest(session_id=session_id, kind=kind, **fields))


def take(stub, lease: store_pb2.TurnLease, lease_id: str = ""):
    return stub.TakeTurnSignals(store_pb2.TakeTurnSignalsRequest(session_id=lease.session_id, lease_id=lease_id or lease.lease_id))


async def test_signals_reach_the_running_turn_once_in_order(stub):
    session = await new_session(stub)
    lease = (await acquire(stub, session.id, holder="scheduler-a")).lease
    assert list((await take(stub, lease)).signals) == []

    cancel = await signal(stub, session.id, "cancel", reason="cancelled: the player left")
    assert cancel.signal.turn_id == lease.turn_id and cancel.holder == "scheduler-a"
    assert not cancel.signal.HasField("taken_at")
    said = await signal(stub, session.id, "interject", text="Wait!", turn_id=lease.turn_id)

    taken = (await take(stub, lease)).signals
    assert [(s.kind, s.reason, s.text) for s in taken] == [("cancel", "cancelled: the player left", ""), ("interject", "", "Wait!")]
    assert [s.id for s in taken] == [cancel.signal.id, said.signal.id] and cancel.signal.id < said.signal.id
    assert all(s.HasField("taken_at") and s.turn_id == lease.turn_id for s in taken)
    assert list((await take(stub, lease)).signals) == []


async def test_a_cancel_without_a_reason_gets_one(stub):
    session = await new_session(stub)
    lease = (await acquire(stub, session.id)).lease
    await signal(stub, session.id, "cancel")
    assert [s.reason for s in (await take(stub, lease)).signals] == ["cancelled by request"]


async def test_concurrent_takers_get_each_signal_once(stub):
    session = await new_session(stub)
    lease = (await acquire(stub, session.id)).lease
    for n in range(10):
        await signal(stub, session.id, "interject", text=f"line {n}")
    replies = await asyncio.gather(*(take(stub, lease) for _ in range(5)))
    texts = sorted(s.text for reply in replies for s in reply.signals)
    assert texts == sorted(f"line {n}" for n in range(10))


async def test_no_running_turn_is_a_failed_precondition(stub):
    session = await new_session(stub)
    error = await expect_error(grpc.StatusCode.FAILED_PRECONDITION, signal(stub, session.id, "cancel"))
    assert f"no turn of session {session.id} is running" in error.details()

    # A finished turn is not running any more; a lapsed lease neither.
    await play_turn(stub, session.id, "The gate opens.")
    await expect_error(grpc.StatusCode.FAILED_PRECONDITION, signal(stub, session.id, "interject", text="Hello?"))
    await acquire(stub, session.id, ttl_ms=50, holder="crashed")
    await asyncio.sleep(0.1)
    error = await expect_error(grpc.StatusCode.FAILED_PRECONDITION, signal(stub, session.id, "cancel"))
    assert "lapsed" in error.details() and "crashed" not in error.details()  # the holder (a host name) stays out

    await expect_error(grpc.StatusCode.NOT_FOUND, signal(stub, "no-such-session", "cancel"))


async def test_another_turn_id_is_a_failed_precondition(stub):
    session = await new_session(stub)
    lease = (await acquire(stub, session.id)).lease
    error = await expect_error(grpc.StatusCode.FAILED_PRECONDITION, signal(stub, session.id, "cancel", turn_id="an-old-turn"))
    assert "an-old-turn" in error.details() and lease.turn_id in error.details()


async def test_only_the_lease_holder_takes_and_a_new_turn_starts_clean(stub):
    session = await new_session(stub)
    first = (await acquire(stub, session.id)).lease
    await signal(stub, session.id, "interject", text="Too late for this turn")
    error = await expect_error(grpc.StatusCode.ABORTED, take(stub, first, lease_id="not-my-lease"))
    assert "not-my-lease" in error.details()

    await commit(stub, first, turn_for(first, status=store_pb2.TURN_STATUS_FAILED, abort_reason="stopped"))
    await expect_error(grpc.StatusCode.ABORTED, take(stub, first))
    second = (await acquire(stub, session.id)).lease
    # The first turn's signal does not leak into the next turn.
    assert list((await take(stub, second)).signals) == []
    await signal(stub, session.id, "interject", text="Now")
    assert [s.text for s in (await take(stub, second)).signals] == ["Now"]


async def test_bad_requests_name_the_field(stub):
    session = await new_session(stub)
    await acquire(stub, session.id)
    cases = [
        (store_pb2.SignalTurnRequest(kind="cancel"), "session_id"),
        (store_pb2.SignalTurnRequest(session_id=session.id), "kind"),
        (store_pb2.SignalTurnRequest(session_id=session.id, kind="pause"), "kind"),
        (store_pb2.SignalTurnRequest(session_id=session.id, kind="interject"), "text"),
        (store_pb2.SignalTurnRequest(session_id=session.id, kind="interject", text="x" * 4001), "text"),
        (store_pb2.SignalTurnRequest(session_id=session.id, kind="interject", text="hi", reason="why"), "reason"),
        (store_pb2.SignalTurnRequest(session_id=session.id, kind="cancel", text="hi"), "text"),
        (store_pb2.SignalTurnRequest(session_id=session.id, kind="cancel", reason="x" * 2001), "reason"),
    ]
    for request, field in cases:
        error = await expect_error(grpc.StatusCode.INVALID_ARGUMENT, stub.SignalTurn(request))
        assert violated_fields(error) == [field], (request, error.details())
    error = await expect_error(grpc.StatusCode.INVALID_ARGUMENT, stub.TakeTurnSignals(store_pb2.TakeTurnSignalsRequest(session_id=session.id)))
    assert violated_fields(error) == ["lease_id"]
    for wait_ms in (-1, 2001):
        error = await expect_error(grpc.StatusCode.INVALID_ARGUMENT, stub.TakeTurnSignals(
            store_pb2.TakeTurnSignalsRequest(session_id=session.id, lease_id="any", wait_ms=wait_ms)))
        assert violated_fields(error) == ["wait_ms"] and "0-2000 ms" in error.details()


async def test_a_waiting_take_is_answered_by_the_signal_and_ends_empty_without_one(stub, monkeypatch):
    # A wait far past the test's own: only SignalTurn's wakeup can answer it in time.
    monkeypatch.setattr(validation, "TAKE_WAIT_MAX_MS", 120_000)
    session = await new_session(stub)
    lease = (await acquire(stub, session.id)).lease
    waiting = asyncio.ensure_future(stub.TakeTurnSignals(
        store_pb2.TakeTurnSignalsRequest(session_id=session.id, lease_id=lease.lease_id, wait_ms=120_000)))
    await asyncio.sleep(0.3)
    assert not waiting.done(), "nothing pending: it waits"
    await signal(stub, session.id, "interject", text="Over here!")
    taken = (await asyncio.wait_for(waiting, 30)).signals
    assert [s.text for s in taken] == ["Over here!"]
    # Nothing pending for the whole wait: an empty answer at its end, not an error.
    assert list((await stub.TakeTurnSignals(
        store_pb2.TakeTurnSignalsRequest(session_id=session.id, lease_id=lease.lease_id, wait_ms=200))).signals) == []


async def test_deleting_the_session_deletes_its_signals(store, stub):
    session = await new_session(stub)
    lease = (await acquire(stub, session.id)).lease
    await signal(stub, session.id, "cancel")
    await commit(stub, lease, turn_for(lease, status=store_pb2.TURN_STATUS_FAILED, abort_reason="stopped"))
    settings = store.settings
    engine = create_store_engine(settings.database_url(), schema=settings.store_database_schema, pool_size=1)
    rows = select(func.count()).select_from(TurnSignalRow).where(TurnSignalRow.session_id == session.id)
    try:
        with engine.connect() as connection:
            assert connection.execute(rows).scalar() == 1
        await stub.EndSession(store_pb2.EndSessionRequest(session_id=session.id, reason="deleted"))
        with engine.connect() as connection:
            assert connection.execute(rows).scalar() == 0
    finally:
        engine.dispose()

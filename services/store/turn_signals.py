"""Signals to a running turn (cancel, interject) that reach it on whichever scheduler replica runs it.

A client's Cancel or Interject may land on a replica that does not run the session's turn;
that replica leaves a signal here, and the replica holding the turn's lease takes it (it
polls while the turn runs, and story agents with steering take before each step).
- SignalTurn answers FAILED_PRECONDITION unless a turn of the session holds a live lease (or
  takes one within wait_ms: an auto-advance chain between two turns), so a signal always names
  a turn that was running when it was sent; an interjection needs a player's turn (HEARS_INTERJECTIONS).
- TakeTurnSignals may wait (wait_ms, at most validation.TAKE_WAIT_MAX_MS) for a signal: SignalTurn through this store wakes
  it at once (services/store/lease_wakeups.py), so the holder asks a few times a turn instead of four times a second.
- TakeTurnSignals hands each signal out once (taken_at set in the same write transaction,
  under the session lock) and only to the lease's holder (ABORTED for any other lease).
- Signals of earlier turns are useless once those turns end: SignalTurn deletes the
  session's signals of other turns, so the table holds at most one turn's worth per session.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import cast

from sqlalchemy import ColumnElement, Table, bindparam, delete, exists, select
from sqlalchemy.orm import Session

from covel.store.v1 import store_pb2
from services.store.database import Database, lock_session
from services.store.lease_wakeups import LeaseWakeups, give_up_at
from services.store.leases import describe, held_lease, lost
from services.store.models import DetachedJobRow, SessionRow, TurnLeaseRow, TurnSignalRow, utcnow
from services.store.proto_mapping import timestamp
from shared.errors import failed_precondition, session_not_found

# The turns an interjection may join: a player's, and what continues it with the player watching. Background work
# (detached jobs, settlements), manual runs and actions never get the player's words (a waiting Interject waits for
# a player's turn instead, then says none runs). The scheduler's own check: services/scheduler/turn/runner.py.
HEARS_INTERJECTIONS = ("player", "continuation", "resume")
# How often a waiting SignalTurn looks for the session's next turn.
WAIT_POLL_S = 0.02


@dataclass
class NoTurn:
    """No turn of the session holds a live lease now; `message` says so."""

    message: str


async def signal_waiting(database: Database, request: store_pb2.SignalTurnRequest) -> store_pb2.SignalTurnResponse:
    """`signal`, waiting up to request.wait_ms for a turn to take the lease (FAILED_PRECONDITION after)."""
    give_up = time.monotonic() + request.wait_ms / 1000
    while True:
        reply = await database.write(signal, request)
        if not isinstance(reply, NoTurn):
            return reply
        if time.monotonic() >= give_up:
            raise failed_precondition(reply.message, reason="NO_RUNNING_TURN", subject=f"sessions/{request.session_id}")
        await asyncio.sleep(WAIT_POLL_S)


async def take_waiting(database: Database, wakeups: LeaseWakeups, request: store_pb2.TakeTurnSignalsRequest,
                       time_remaining_s: float | None) -> list[store_pb2.TurnSignal]:
    """The lease's pending signals, waiting up to request.wait_ms (and the caller's deadline) for one to come;
    each look a read, the usual "nothing pending" without the write lock."""
    give_up = give_up_at(request.wait_ms, time_remaining_s)
    with wakeups.watching(request.session_id):
        while True:
            ticket = wakeups.ticket(request.session_id)
            if await database.read(any_pending, request.session_id, request.lease_id):
                return await database.write(take, request.session_id, request.lease_id)
            left = give_up - time.monotonic()
            if left <= 0:
                return []
            await wakeups.wait(ticket, left)


def signal_to_proto(row: TurnSignalRow) -> store_pb2.TurnSignal:
    return store_pb2.TurnSignal(
        id=row.id,
        session_id=row.session_id,
        turn_id=row.turn_id,
        kind=row.kind,
        reason=str(row.payload.get("reason", "")),
        text=str(row.payload.get("text", "")),
        created_at=timestamp(row.created_at),
        taken_at=timestamp(row.taken_at),
    )


def signal(db: Session, request: store_pb2.SignalTurnRequest) -> store_pb2.SignalTurnResponse | NoTurn:
    lock_session(db, request.session_id)
    now = utcnow()
    lease = db.get(TurnLeaseRow, request.session_id)
    if lease is None or lease.deadline <= now:
        job = db.execute(_RUNNING_JOB, {"b_session": request.session_id}).first() if request.kind == "interject" else None
        if job is not None:
            # A detached job runs without the lease (services/scheduler/turn/lease_hold.py).
            return NoTurn(f"no player's turn of session {request.session_id} is running: its background work (detached job "
                          f"{job.id}, {job.runtime_id}) hears no interjection")
        lapsed = f" (the last lease lapsed: {describe(lease)})" if lease is not None else ""
        return NoTurn(f"no turn of session {request.session_id} is running{lapsed}")
    if request.kind == "interject" and lease.origin not in HEARS_INTERJECTIONS:
        return NoTurn(f"no player's turn of session {request.session_id} is running: turn {lease.turn_id} is "
                      f"{lease.origin} work, which hears no interjection")
    if request.turn_id and request.turn_id != lease.turn_id:
        raise failed_precondition(
            f"turn {request.turn_id} of session {request.session_id} is not running; the running turn is {lease.turn_id}",
            reason="NO_RUNNING_TURN", subject=f"turns/{request.turn_id}",
        )
    db.execute(
        delete(TurnSignalRow)
        .where(TurnSignalRow.session_id == request.session_id, TurnSignalRow.turn_id != lease.turn_id)
        .execution_options(synchronize_session=False)
    )
    payload = {"reason": request.reason or "cancelled by request"} if request.kind == "cancel" else {"text": request.text}
    row = TurnSignalRow(session_id=request.session_id, turn_id=lease.turn_id, kind=request.kind, payload=payload, created_at=now)
    db.add(row)
    db.flush()
    return store_pb2.SignalTurnResponse(signal=signal_to_proto(row), holder=lease.holder)


# A declarative class with __tablename__ always maps a Table; DeclarativeBase types __table__ as any FromClause.
_SESSIONS, _LEASES, _SIGNALS = (cast(Table, row.__table__) for row in (SessionRow, TurnLeaseRow, TurnSignalRow))
# Built once: building a statement costs more than running it. No lease: lease_id and pending are NULL.
_PENDING_FOR_LEASE = (
    select(_SESSIONS.c.id, _LEASES.c.lease_id, exists().where(
        _SIGNALS.c.session_id == _SESSIONS.c.id, _SIGNALS.c.turn_id == _LEASES.c.turn_id, _SIGNALS.c.taken_at.is_(None),
    ).label("pending"))
    .select_from(_SESSIONS.outerjoin(_LEASES, _LEASES.c.session_id == _SESSIONS.c.id))
    .where(_SESSIONS.c.id == bindparam("b_session"))
)
_RUNNING_JOB = (select(DetachedJobRow.id, DetachedJobRow.runtime_id)
                .where(DetachedJobRow.session_id == bindparam("b_session"), DetachedJobRow.status == "running").limit(1))


def _pending(session_id: str, turn_id: str) -> tuple[ColumnElement[bool], ...]:
    return (TurnSignalRow.session_id == session_id, TurnSignalRow.turn_id == turn_id, TurnSignalRow.taken_at.is_(None))


def any_pending(db: Session, session_id: str, lease_id: str) -> bool:
    """A read, for the usual case of nothing pending: the lease must be held (ABORTED otherwise). One Core statement
    built once (the session, its lease and whether its turn has a signal waiting): asked a few times every turn."""
    found = db.connection().execute(_PENDING_FOR_LEASE, {"b_session": session_id}).one_or_none()
    if found is None:
        raise session_not_found(session_id)
    if found.lease_id != lease_id:
        raise lost(db, session_id, lease_id, "; take its turn's signals with the lease you hold")
    return bool(found.pending)


def take(db: Session, session_id: str, lease_id: str) -> list[store_pb2.TurnSignal]:
    lock_session(db, session_id)
    lease = held_lease(db, session_id, lease_id, "; take its turn's signals with the lease you hold")
    rows = db.execute(select(TurnSignalRow).where(*_pending(session_id, lease.turn_id)).order_by(TurnSignalRow.id)).scalars().all()
    now = utcnow()
    for row in rows:
        row.taken_at = now
    db.flush()
    return [signal_to_proto(row) for row in rows]

"""The per-session turn lease: one turn runs per session at a time.

A lease is one row of `turn_leases` per session. It is taken with a conditional write
inside a write transaction that has locked the session (PostgreSQL: the session row
`FOR UPDATE`; SQLite: `BEGIN IMMEDIATE`), so of two concurrent acquirers exactly one wins:
- no row: INSERT (the primary key is the session id; a second INSERT fails);
- an expired row: UPDATE ... WHERE lease_id = <the expired one> AND deadline <= now.

A lease stays valid past its deadline until another acquirer takes it over: the holder
may still renew or commit with it. Times are the store's clock (UTC).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, cast

import grpc
from sqlalchemy import CursorResult, Table, bindparam, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from covel.store.v1 import store_pb2
from services.store import story_line
from services.store.database import Database, lock_session_id, read_locked_session, read_session, write_session
from services.store.lease_wakeups import LeaseWakeups, give_up_at
from services.store.models import ACTIVE_JOB_STATUSES, DetachedJobRow, SessionRow, TurnLeaseRow, TurnRow, utcnow
from services.store.proto_mapping import lease_to_proto, session_to_proto
from services.store.sessions import load_turn
from services.store.turn_reads import read_for_turn
from shared.errors import ServiceError, aborted, failed_precondition
from shared.ids import new_id

POLL_FIRST_S = 0.02
POLL_MAX_S = 0.25


@dataclass
class Busy:
    """The session's lease is held by a live holder; `message` says by whom and until when."""

    message: str


@dataclass
class QueueFull(Busy):
    """Back-pressure: the detached queue (the session's, or all of it) is at its limit."""


@dataclass(frozen=True)
class QueueLimits:
    per_session: int = 16
    total: int = 2_000


# Turns that drain the detached queue or settle what a turn owes never wait for it.
QUEUE_EXEMPT_ORIGINS = ("background", "settlement")
# A player's turn waiting for the lease goes before them: it marks the session for this long at each poll.
PLAYER_ORIGINS = ("", "player", "continuation", "resume")
PLAYER_WAIT_MARK = timedelta(seconds=2)
# When a refused turn may try again.
BUSY_RETRY_MS = 500
QUEUE_FULL_RETRY_MS = 2_000


def describe(row: TurnLeaseRow) -> str:
    # Callers relay this to players: the lease id and the holder (a scheduler's host name) stay out.
    return f"turn {row.turn_id}, lease until {row.deadline.isoformat()}"


def _busy(session_id: str, row: TurnLeaseRow, idempotency_key: str) -> Busy:
    if idempotency_key and row.idempotency_key == idempotency_key:
        return Busy(f"a turn with idempotency key {idempotency_key!r} is still running in session {session_id}: {describe(row)}")
    return Busy(f"session {session_id} has a turn running: {describe(row)}")


def try_acquire(
    db: Session, session_id: str, holder: str, ttl_ms: int, idempotency_key: str, origin: str = "player",
    limits: QueueLimits | None = None, retry_turn_id: str = "", turn_id: str = "",
) -> store_pb2.AcquireTurnLeaseResponse | Busy:
    """Taken once per turn: Core statements (the session and lease rows read, the lease written), no ORM objects loaded."""
    session = read_locked_session(db, session_id)
    connection = db.connection()
    finished, recorded = _recorded_turn(db, session, idempotency_key)
    if recorded is not None:
        return recorded
    now = utcnow()
    current = _current_lease(db, session_id)
    player_facing = origin in PLAYER_ORIGINS
    if current is not None and current.deadline > now:
        if player_facing:
            # Renewed at each poll of its wait: the session's detached work is not claimed, nor takes the lease, meanwhile.
            session.player_waiting_until = now + PLAYER_WAIT_MARK
            write_session(db, session, ("player_waiting_until",))
        return _busy(session_id, current, idempotency_key)
    if origin in QUEUE_EXEMPT_ORIGINS and session.player_waiting_until is not None and session.player_waiting_until > now:
        return Busy(f"session {session_id}: a player's turn waits for it, and goes first")
    if limits is not None and origin not in QUEUE_EXEMPT_ORIGINS:
        full = _queue_full(db, session_id, limits)
        if full is not None:
            return full
    if retry_turn_id:
        # Before the lease's logical turn is counted: it is the retried turn's (story_line.py).
        story_line.begin_retry(db, session, retry_turn_id)
    if finished is not None:
        # A retryable failure: this retry runs the turn again and takes over its key (the failed record keeps none).
        connection.execute(_FORGET_KEY, {"b_id": finished.id})
    lease = TurnLeaseRow(
        session_id=session_id,
        lease_id=new_id(),
        turn_id=turn_id or new_id(),
        holder=holder,
        idempotency_key=idempotency_key or None,
        # A player's input opens a logical turn; what follows it (continuations, manual runs) shares it.
        logical_turn=session.completed_player_turns + 1 if origin in ("", "player") else max(session.completed_player_turns, 1),
        origin=origin or "player",
        acquired_at=now,
        deadline=now + timedelta(milliseconds=ttl_ms),
    )
    if player_facing and session.player_waiting_until is not None:
        session.player_waiting_until = None
        write_session(db, session, ("player_waiting_until",))
    values = {column.name: getattr(lease, column.name) for column in _LEASES.columns}
    if current is None:
        # Fails with IntegrityError if another acquirer inserted first (see acquire()).
        connection.execute(_LEASES.insert(), values)
    else:
        # An UPDATE's result is a CursorResult (it has rowcount); Connection.execute is typed as returning any Result.
        changes = {name: value for name, value in values.items() if name != "session_id"}
        taken = cast(CursorResult[Any], connection.execute(_TAKE_OVER, {**changes, "b_session": session_id, "b_lease": current.lease_id, "b_now": now}))
        if taken.rowcount != 1:
            return _busy(session_id, _current_lease(db, session_id) or current, idempotency_key)
    return store_pb2.AcquireTurnLeaseResponse(lease=lease_to_proto(lease), session=session_to_proto(session))


def _recorded_turn(db: Session, session: SessionRow, idempotency_key: str) -> tuple[Any, store_pb2.AcquireTurnLeaseResponse | None]:
    """The turn recorded under the key (None: none) and, when it is not one to retry, the reply that answers with it;
    FAILED_PRECONDITION when the session ended."""
    finished = None
    if idempotency_key:
        finished = db.connection().execute(_FINISHED, {"b_session": session.id, "b_key": idempotency_key}).one_or_none()
        if finished is not None and not finished.retryable:
            return finished, store_pb2.AcquireTurnLeaseResponse(existing_turn=load_turn(db, db.get_one(TurnRow, finished.id)),
                                                                session=session_to_proto(session))
    if session.status != "active":
        raise failed_precondition(f"session {session.id} has ended; no more turns run in it", reason="SESSION_ENDED",
                                  subject=f"sessions/{session.id}")
    return finished, None


def snapshot(db: Session, request: store_pb2.AcquireTurnLeaseRequest) -> store_pb2.AcquireTurnLeaseResponse:
    """without_lease (a detached job that runs before it takes the lease for its commit): the turn recorded under its
    key, else the session and the reads, in one read unit; no lease is taken."""
    session = read_session(db, request.session_id)
    _, recorded = _recorded_turn(db, session, request.idempotency_key)
    if recorded is not None:
        return recorded
    reply = read_for_turn(db, request.session_id, request.reads)
    reply.session.CopyFrom(session_to_proto(session))
    return reply


def _queue_full(db: Session, session_id: str, limits: QueueLimits) -> QueueFull | None:
    """Both counts in one statement: the session's active jobs, and every session's queued ones."""
    waiting, queued = db.connection().execute(_QUEUE_COUNTS, {"b_session": session_id}).one()
    if waiting >= limits.per_session:
        return QueueFull(f"session {session_id} has {waiting} detached jobs queued or running (at most {limits.per_session}); "
                         "its next turn starts once they drain")
    if queued >= limits.total:
        return QueueFull(f"the detached job queue holds {queued} jobs (at most {limits.total}); new turns start once it drains")
    return None


def _current_lease(db: Session, session_id: str) -> TurnLeaseRow | None:
    """The session's lease row as read with Core (a transient row)."""
    found = db.connection().execute(_CURRENT, {"b_session": session_id}).one_or_none()
    return None if found is None else TurnLeaseRow(**found._mapping)


async def acquire(
    database: Database,
    request: store_pb2.AcquireTurnLeaseRequest,
    ttl_ms: int,
    time_remaining_s: float | None,
    limits: QueueLimits | None = None,
    wakeups: LeaseWakeups | None = None,
) -> store_pb2.AcquireTurnLeaseResponse:
    """Take the lease, waiting up to `wait_ms` (and the caller's deadline) for a live holder to let go, or
    for the detached queue to drain below `limits` (ABORTED / RESOURCE_EXHAUSTED, with RetryInfo, after).
    Between tries it sleeps until `wakeups` says the session may be free, or its next poll."""
    give_up = give_up_at(request.wait_ms, time_remaining_s)
    wakeups = wakeups or LeaseWakeups()
    # A detached job or a settlement polls every POLL_MAX_S from the start (a player's next turn, acting at once, goes
    # first: a player's commit does not wake it); a player's turn from POLL_FIRST_S, and its wait marks the session.
    pause = POLL_MAX_S if request.origin in QUEUE_EXEMPT_ORIGINS else POLL_FIRST_S
    in_line = wakeups.in_line(request.session_id) if request.origin in PLAYER_ORIGINS else contextlib.nullcontext(lambda: True)
    with wakeups.watching(request.session_id), in_line as first:
        while True:
            ticket = wakeups.ticket(request.session_id)
            result = await _try(database, request, ttl_ms, limits) if first() else Busy(
                f"session {request.session_id}: another player's turn came first and goes first")
            if not isinstance(result, Busy):
                return result
            left = give_up - time.monotonic()
            if left <= 0:
                if isinstance(result, QueueFull):
                    raise ServiceError(grpc.StatusCode.RESOURCE_EXHAUSTED, result.message, reason="DETACHED_QUEUE_FULL",
                                       retry_after_ms=QUEUE_FULL_RETRY_MS)
                raise busy_error(result.message)
            if not await wakeups.wait(ticket, min(pause, left)):
                pause = min(pause * 2, POLL_MAX_S)


async def _try(database: Database, request: store_pb2.AcquireTurnLeaseRequest, ttl_ms: int, limits: QueueLimits | None
               ) -> store_pb2.AcquireTurnLeaseResponse | Busy:
    try:
        return await database.write(try_acquire, request.session_id, request.holder, ttl_ms, request.idempotency_key, request.origin,
                                    limits, request.retry_turn_id, request.turn_id)
    except IntegrityError:
        return Busy(f"session {request.session_id} has a turn running: another holder took the lease just now")


def busy_error(message: str) -> ServiceError:
    """A wait for the session's lease that ran out: ABORTED, SESSION_BUSY, with when to try again."""
    return ServiceError(grpc.StatusCode.ABORTED, message, reason="SESSION_BUSY", retry_after_ms=BUSY_RETRY_MS)


def lost(db: Session, session_id: str, lease_id: str, what: str) -> ServiceError:
    current = db.get(TurnLeaseRow, session_id)
    if current is None:
        return aborted(f"turn lease lost: lease {lease_id} on session {session_id} was released{what}")
    # The caller's own lease id, but of the lease that took over only its turn (describe).
    return aborted(f"turn lease lost: lease {lease_id} on session {session_id} was taken over ({describe(current)}){what}")


def held_lease(db: Session, session_id: str, lease_id: str, what: str = "") -> TurnLeaseRow:
    """The caller's lease, still held (the session must already be locked); ABORTED otherwise."""
    row = db.get(TurnLeaseRow, session_id)
    if row is None or row.lease_id != lease_id:
        raise lost(db, session_id, lease_id, what)
    return row


def renew(db: Session, session_id: str, lease_id: str, ttl_ms: int) -> store_pb2.TurnLease:
    """Core statements built once: the session locked (one column), the lease read, its deadline written."""
    lock_session_id(db, session_id)
    row = _current_lease(db, session_id)
    if row is None or row.lease_id != lease_id:
        raise lost(db, session_id, lease_id, "; renew failed")
    row.deadline = utcnow() + timedelta(milliseconds=ttl_ms)
    db.connection().execute(_RENEW, {"b_session": session_id, "b_lease": lease_id, "deadline": row.deadline})
    return lease_to_proto(row)


def cut_after_restart(db: Session, grace_ms: int) -> int:
    """At the store's start: every lease ends within `grace_ms` (their holders may have died meanwhile).
    How many were cut."""
    cap = utcnow() + timedelta(milliseconds=grace_ms)
    cut = cast(CursorResult[Any], db.connection().execute(_LEASES.update().where(_LEASES.c.deadline > cap).values(deadline=cap)))
    return cut.rowcount


def release(db: Session, session_id: str, lease_id: str) -> None:
    """Idempotent: releasing a lease that is gone (released, taken over) does nothing.

    A Core DELETE: the ORM's bulk delete would first look for the row among the session's objects."""
    db.connection().execute(_RELEASE, {"b_session": session_id, "b_lease": lease_id})


# A declarative class with __tablename__ always maps a Table; DeclarativeBase types __table__ as any FromClause.
_LEASES = cast(Table, TurnLeaseRow.__table__)
_TURNS = cast(Table, TurnRow.__table__)
# Built once: building a statement costs more than running it.
_FINISHED = select(_TURNS.c.id, _TURNS.c.retryable).where(
    _TURNS.c.session_id == bindparam("b_session"), _TURNS.c.idempotency_key == bindparam("b_key"))
_FORGET_KEY = _TURNS.update().where(_TURNS.c.id == bindparam("b_id")).values(idempotency_key=None)
_JOBS = cast(Table, DetachedJobRow.__table__)
_SESSION_JOBS = select(func.count()).select_from(_JOBS).where(
    _JOBS.c.session_id == bindparam("b_session"), _JOBS.c.status.in_(ACTIVE_JOB_STATUSES))
_QUEUED_JOBS = select(func.count()).select_from(_JOBS).where(_JOBS.c.status == "queued")
_QUEUE_COUNTS = select(_SESSION_JOBS.scalar_subquery(), _QUEUED_JOBS.scalar_subquery())
_CURRENT = select(_LEASES).where(_LEASES.c.session_id == bindparam("b_session"))
_TAKE_OVER = _LEASES.update().where(
    _LEASES.c.session_id == bindparam("b_session"), _LEASES.c.lease_id == bindparam("b_lease"), _LEASES.c.deadline <= bindparam("b_now"),
)
_RENEW = _LEASES.update().where(_LEASES.c.session_id == bindparam("b_session"), _LEASES.c.lease_id == bindparam("b_lease"))
_RELEASE = _LEASES.delete().where(_LEASES.c.session_id == bindparam("b_session"), _LEASES.c.lease_id == bindparam("b_lease"))


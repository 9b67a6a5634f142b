"""A detached job's commit in one call (CommitTurnRequest.job): the session's lease taken and released in the commit's
transaction, and the job ended there when its turn is recorded COMMITTED.

Before, a job's commit was three calls and three write transactions: AcquireTurnLease (for the turn the job ran),
CommitTurn, CompleteDetachedJob. The rules are those calls' own: the lease is taken as `leases.try_acquire` takes
it for origin "background" (a live holder, or a player's turn waiting for the session, keep it busy: the player goes
first; a turn already recorded under the job's key answers with that turn; a retryable one gives up its key), and
the job ends "succeeded" only while its claim is still held, as CompleteDetachedJob would check it (a claim that
lapsed is left for the worker's CompleteDetachedJob, which records the lapse).
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from covel.store.v1 import store_pb2
from services.store import leases
from services.store.database import Database
from services.store.detached_jobs import job_to_proto
from services.store.lease_wakeups import LeaseWakeups, give_up_at
from services.store.models import DetachedJobRow, SessionRow
from services.store.proto_mapping import session_to_proto
from shared.structs import from_struct


class LeaseBusy(Exception):
    """The session's lease is not free for the job's commit now (the transaction writes nothing)."""


def take_lease(db: Session, session: SessionRow, request: store_pb2.CommitTurnRequest, ttl_ms: int
               ) -> store_pb2.TurnLease | store_pb2.CommitTurnResponse:
    """The lease for the job's turn, or the reply for a turn already recorded under its key; LeaseBusy when busy."""
    turn = request.turn
    try:
        with db.begin_nested():
            taken = leases.try_acquire(db, session.id, request.job.holder, ttl_ms, turn.idempotency_key, "background",
                                       turn_id=turn.id)
    except IntegrityError as error:
        raise LeaseBusy(f"session {session.id} has a turn running: another holder took the lease just now") from error
    if isinstance(taken, leases.Busy):
        raise LeaseBusy(taken.message)
    if taken.HasField("existing_turn"):
        return store_pb2.CommitTurnResponse(turn=taken.existing_turn, session=session_to_proto(session))
    return taken.lease


async def commit_when_free(database: Database, commit: Any, request: store_pb2.CommitTurnRequest, time_remaining_s: float | None,
                           wakeups: LeaseWakeups) -> store_pb2.CommitTurnResponse:
    """`commit` (turn_commit.commit_turn with its limits) run again while the lease is busy, for up to job.wait_ms (and
    the caller's deadline), woken when the session may be free or at a job's poll (leases.POLL_MAX_S); then ABORTED
    (SESSION_BUSY). A busy try writes nothing."""
    give_up = give_up_at(request.job.wait_ms, time_remaining_s)
    with wakeups.watching(request.session_id):
        while True:
            ticket = wakeups.ticket(request.session_id)
            try:
                return await database.write(commit, request)
            except LeaseBusy as busy:
                left = give_up - time.monotonic()
                if left <= 0:
                    raise leases.busy_error(str(busy)) from busy
            await wakeups.wait(ticket, min(leases.POLL_MAX_S, left))


def end_job(db: Session, job: store_pb2.JobCommit, now: datetime) -> store_pb2.DetachedJob | None:
    """The job "succeeded" with its result, if its claim is still held and live; None (left as it is) otherwise."""
    statement = select(DetachedJobRow).where(DetachedJobRow.id == job.job_id)
    if db.get_bind().dialect.name == "postgresql":
        statement = statement.with_for_update()
    row: Any = db.execute(statement).scalar_one_or_none()
    if row is None or row.status != "running" or row.lease_id != job.job_lease_id or _lapsed(row, now):
        return None
    row.status, row.finished_at, row.error = "succeeded", now, ""
    row.result = from_struct(job.result) if job.HasField("result") else None
    db.flush()
    return job_to_proto(row)


def _lapsed(row: DetachedJobRow, now: datetime) -> bool:
    return bool(row.lease_deadline and now >= row.lease_deadline)

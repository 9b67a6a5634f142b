"""Detached jobs: a durable queue of post-turn runtimes, claimed by workers with a lease.

- Enqueue happens inside the turn's commit transaction (CommitTurnRequest.detached_jobs), so
  a turn that does not commit enqueues nothing.
- Every committed turn's job runs, with that turn's snapshot (a memory extractor must see each
  turn), and the jobs of one (session, plugin, runtime) run one at a time, oldest first: at most
  one running, enforced by a partial unique index. A runtime that only needs the latest turn says
  schedule.detached.coalesce: its new job supersedes its jobs still queued.
- Claim: the oldest queued job whose runtime has no job running or backing off (PostgreSQL: `FOR
  UPDATE SKIP LOCKED`, so concurrent workers never wait on each other or take the same job; two
  workers racing for one runtime's next jobs meet the index, and the loser claims nothing this
  time). Every claim first sweeps: jobs queued longer than max_queue_ms and running jobs past
  max_execution_ms become `timed-out`; a running job whose lease lapsed (its worker died) is
  retried like a passing failure.
- Passing failures (the worker's "retry", a lapsed lease) queue the job again after a backoff
  (`not_before`), doubling per attempt, until the store's maximum of attempts; then it is `parked`
  with the reason, for an operator to see (ListDetachedJobs) and queue again (RequeueDetachedJob).
- An idle worker's claim waits in the store (wait_ms, job_claims.py) until a commit queues a job; each look
  first reads (`claim_in_sight`, no write lock): only when a job is claimable or something is due for the sweep
  does it claim in a write.
- Renew extends the lease (never past the execution deadline); complete ends the job as
  succeeded or failed, or releases it back to the queue (status queued: its worker is shutting
  down). A lost lease answers ABORTED.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from google.protobuf import struct_pb2
from sqlalchemy import CursorResult, Table, and_, bindparam, exists, func, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from covel.store.v1 import store_pb2
from services.store.models import ACTIVE_JOB_STATUSES, DetachedJobRow, SessionRow, utcnow
from services.store.proto_mapping import timestamp
from services.store.sessions import find_session
from shared.errors import aborted, failed_precondition, not_found
from shared.ids import new_id
from shared.page_tokens import decode_token, encode_token, page_size
from shared.structs import from_struct, to_struct
from shared.telemetry import metrics

DEFAULT_MAX_QUEUE_MS = 10 * 60 * 1000
DEFAULT_MAX_EXECUTION_MS = 5 * 60 * 1000
DEFAULT_LEASE_TTL_MS = 30_000
FINISHED = ("succeeded", "failed")
# What RequeueDetachedJob takes back: jobs that ended without success for a reason an operator may have fixed.
REQUEUEABLE = ("parked", "failed", "timed-out", "orphaned", "dropped")
DEFAULT_PAGE, MAX_PAGE = 100, 500


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 5
    base_ms: int = 1_000
    max_ms: int = 60_000

    def backoff(self, attempts: int) -> timedelta:
        return timedelta(milliseconds=min(self.max_ms, self.base_ms * 2 ** min(max(0, attempts - 1), 30)))


# A declarative class with __tablename__ always maps a Table; DeclarativeBase types __table__ as any FromClause.
_JOBS = cast(Table, DetachedJobRow.__table__)
_COLUMNS = tuple(column.name for column in _JOBS.columns)
# Built once: building a statement costs more than running it.
_INSERT = _JOBS.insert()
# Every session's queued jobs (the hard bound of a commit's enqueue).
_QUEUED = select(func.count()).select_from(_JOBS).where(_JOBS.c.status == "queued")


def job_to_proto(row: DetachedJobRow, input_struct: struct_pb2.Struct | None = None) -> store_pb2.DetachedJob:
    """`input_struct`: the job's input as the Struct it came in (a commit's spec), not converted back from the row."""
    return store_pb2.DetachedJob(
        id=row.id,
        session_id=row.session_id,
        turn_id=row.turn_id,
        plugin_id=row.plugin_id,
        runtime_id=row.runtime_id,
        status=row.status,
        input=(input_struct if input_struct.fields else None) if input_struct is not None else to_struct(row.input) if row.input else None,
        settle=row.settle,
        max_queue_ms=row.max_queue_ms,
        max_execution_ms=row.max_execution_ms,
        enqueued_at=timestamp(row.enqueued_at),
        lease_id=row.lease_id or "",
        holder=row.holder,
        claimed_at=timestamp(row.claimed_at),
        lease_deadline=timestamp(row.lease_deadline),
        attempts=row.attempts,
        result=to_struct(row.result) if row.result else None,
        error=row.error,
        finished_at=timestamp(row.finished_at),
        not_before=timestamp(row.not_before),
    )


def enqueue(db: Session, session_id: str, turn_id: str, specs: list[store_pb2.DetachedJobSpec], now: datetime,
            total: int | None = None) -> tuple[list[DetachedJobRow], list[dict[str, Any]]]:
    """The jobs of one commit (one per spec) and trace entries for those not queued. `total` is a hard bound on the
    queued jobs of every session (COVEL_STORE_DETACHED_MAX_TOTAL): acquiring a turn waits below it, but turns that
    started together may each add jobs; a job past it is recorded `dropped` (its error says why; an operator may
    queue it again with RequeueDetachedJob) and the turn commits as it is. Each job is written with a Core INSERT
    (its row kept for the reply, outside the ORM session), in the order of the specs: a later spec's coalescing
    supersedes an earlier one's job."""
    connection = db.connection()
    enqueued: list[DetachedJobRow] = []
    trace: list[dict[str, Any]] = []
    queued = connection.execute(_QUEUED).scalar_one() if total is not None else 0
    for spec in specs:
        job_id = new_id()
        if spec.coalesce:
            queued -= _supersede(db, session_id, spec, job_id, turn_id, now)
        dropped = total is not None and queued >= total
        row = DetachedJobRow(
            id=job_id,
            session_id=session_id,
            turn_id=turn_id,
            plugin_id=spec.plugin_id,
            runtime_id=spec.runtime_id,
            status="dropped" if dropped else "queued",
            input=from_struct(spec.input),
            settle=spec.settle,
            max_queue_ms=spec.max_queue_ms or DEFAULT_MAX_QUEUE_MS,
            max_execution_ms=spec.max_execution_ms or DEFAULT_MAX_EXECUTION_MS,
            enqueued_at=now,
            lease_id=None,
            holder="",
            claimed_at=None,
            lease_deadline=None,
            attempts=0,
            result=None,
            error=f"not queued: the detached queue held {queued} jobs, at most {total} (COVEL_STORE_DETACHED_MAX_TOTAL)" if dropped else "",
            finished_at=now if dropped else None,
            not_before=None,
        )
        connection.execute(_INSERT, {name: getattr(row, name) for name in _COLUMNS})
        enqueued.append(row)
        if dropped:
            trace.append({"code": "detached.dropped", "jobId": job_id, "runtimeId": spec.runtime_id, "reason": row.error})
        else:
            queued += 1
    return enqueued, trace


def _queued_since(row: Any) -> datetime:
    """Its queue time counts from its last (re)queueing: a retried job waits its backoff on a fresh clock."""
    return row.not_before or row.enqueued_at


def _supersede(db: Session, session_id: str, spec: store_pb2.DetachedJobSpec, job_id: str, turn_id: str, now: datetime) -> int:
    """schedule.detached.coalesce: the runtime's jobs of the session still queued give way to the new one (how many)."""
    superseded = db.execute(update(DetachedJobRow).where(
        DetachedJobRow.session_id == session_id, DetachedJobRow.plugin_id == spec.plugin_id,
        DetachedJobRow.runtime_id == spec.runtime_id, DetachedJobRow.status == "queued",
    ).values(status="superseded", finished_at=now, error=f"superseded by job {job_id} of turn {turn_id} (schedule.detached.coalesce)"))
    return cast(CursorResult[Any], superseded).rowcount


def _due(row: Any, now: datetime) -> bool:
    """Whether the sweep would time out or retry this active job now (the conditions of _sweep)."""
    if row.status == "queued":
        return now >= _queued_since(row) + timedelta(milliseconds=row.max_queue_ms)
    return bool(
        (row.claimed_at and now >= row.claimed_at + timedelta(milliseconds=row.max_execution_ms))
        or (row.lease_deadline and now >= row.lease_deadline)
    )


# The columns _due and claim_in_sight read of every active job (status queued or running), with Core: built once.
_ACTIVE = select(
    _JOBS.c.id, _JOBS.c.status, _JOBS.c.session_id, _JOBS.c.plugin_id, _JOBS.c.runtime_id, _JOBS.c.enqueued_at,
    _JOBS.c.max_queue_ms, _JOBS.c.claimed_at, _JOBS.c.max_execution_ms, _JOBS.c.lease_deadline, _JOBS.c.not_before,
).where(_JOBS.c.status.in_(ACTIVE_JOB_STATUSES))


def claim_in_sight(db: Session, session_id: str) -> bool:
    """A read: whether a claim now would sweep a job (any session's) or find one to claim."""
    now = utcnow()
    rows = db.connection().execute(_ACTIVE).all()
    queued = [row for row in rows if row.status == "queued"]
    oldest = min((_queued_since(row) for row in queued), default=now)
    metrics.record_detached_queue(len(queued), len(rows) - len(queued), max(0.0, (now - oldest).total_seconds()))
    if any(_due(row, now) for row in rows):
        return True
    busy = {(row.session_id, row.plugin_id, row.runtime_id) for row in rows
            if row.status == "running" or (row.not_before and row.not_before > now)}
    sessions = {row.session_id for row in queued if (not session_id or row.session_id == session_id)
                and (row.session_id, row.plugin_id, row.runtime_id) not in busy}
    # A session whose player's turn waits for its lease keeps its jobs queued (claim's player_waiting): while
    # a player plays, the workers' polls find that with this read instead of a write that claims nothing.
    if not sessions:
        return False
    waiting = db.execute(_PLAYERS_WAITING, {"b_sessions": list(sessions), "b_now": now}).scalars()
    return bool(sessions - set(waiting))


_PLAYERS_WAITING = select(SessionRow.id).where(SessionRow.id.in_(bindparam("b_sessions", expanding=True)),
                                              SessionRow.player_waiting_until > bindparam("b_now"))


def _sweep(db: Session, now: datetime, policy: RetryPolicy) -> None:
    """Time out what expired, retry what its worker left (portable: compare in Python on the few active rows). The
    active rows are read as plain rows; only the due ones (usually none) are loaded as ORM objects and changed."""
    due = [row.id for row in db.connection().execute(_ACTIVE) if _due(row, now)]
    if not due:
        return
    for row in db.execute(select(DetachedJobRow).where(DetachedJobRow.id.in_(due))).scalars():
        if row.status == "queued" and now >= _queued_since(row) + timedelta(milliseconds=row.max_queue_ms):
            row.status, row.error, row.finished_at = "timed-out", f"waited longer than maxQueueMs ({row.max_queue_ms} ms)", now
        elif row.status == "running" and row.claimed_at and now >= row.claimed_at + timedelta(milliseconds=row.max_execution_ms):
            row.status, row.error, row.finished_at = "timed-out", f"ran longer than maxExecutionMs ({row.max_execution_ms} ms)", now
        elif row.status == "running" and row.lease_deadline and now >= row.lease_deadline:
            retry_or_park(row, now, "its worker's lease lapsed (the worker stopped or died)", policy)
    db.flush()


def retry_or_park(row: DetachedJobRow, now: datetime, why: str, policy: RetryPolicy) -> None:
    """A passing failure: queued again after its backoff, or parked once it has had max_attempts."""
    row.lease_id, row.holder, row.claimed_at, row.lease_deadline = None, "", None, None
    if row.attempts >= policy.max_attempts:
        row.status, row.finished_at = "parked", now
        row.error = f"parked after {row.attempts} attempts: {why}; RequeueDetachedJob queues it again"
        return
    wait = policy.backoff(row.attempts)
    row.status, row.not_before = "queued", now + wait
    row.error = f"attempt {row.attempts} of {policy.max_attempts} failed: {why}; retried in {wait.total_seconds():g} s"


def claim(db: Session, holder: str, ttl_ms: int, session_id: str, policy: RetryPolicy) -> store_pb2.DetachedJob | None:
    """The oldest claimable job (of `session_id`, or of any session), running under a new lease; None: none.
    Core statements built once: the sweep's read, the claimable job's row, its UPDATE in a savepoint."""
    now = utcnow()
    _sweep(db, now, policy)
    connection = db.connection()
    postgres = connection.dialect.name == "postgresql"
    statement = (_NEXT_OF_SESSION_LOCKED if postgres else _NEXT_OF_SESSION) if session_id else (_NEXT_LOCKED if postgres else _NEXT)
    found = connection.execute(statement, {"b_now": now, "b_session": session_id}).one_or_none()
    if found is None:
        return None
    claimed = {"status": "running", "lease_id": new_id(), "holder": holder, "claimed_at": now, "attempts": found.attempts + 1,
               "lease_deadline": min(now + timedelta(milliseconds=ttl_ms), now + timedelta(milliseconds=found.max_execution_ms))}
    try:
        with db.begin_nested():
            connection.execute(_CLAIM, {"b_id": found.id, **claimed})
    except IntegrityError:
        # Another worker just started this runtime's previous job: this one waits for the next poll.
        return None
    return job_to_proto(DetachedJobRow(**{**found._mapping, **claimed}))


# A declarative class with __tablename__ always maps a Table; DeclarativeBase types __table__ as any FromClause.
_BUSY = _JOBS.alias("busy")
_SESSIONS = cast(Table, SessionRow.__table__)
# Running, or its older job waits out a backoff: the runtime's jobs keep their order.
_RUNTIME_BUSY = exists().where(
    _BUSY.c.session_id == _JOBS.c.session_id, _BUSY.c.plugin_id == _JOBS.c.plugin_id, _BUSY.c.runtime_id == _JOBS.c.runtime_id,
    or_(_BUSY.c.status == "running", and_(_BUSY.c.status == "queued", _BUSY.c.not_before > bindparam("b_now"))),
)
# A session whose player's turn waits for its lease: its jobs wait behind that turn (services/store/leases.py).
_PLAYER_WAITING = exists().where(_SESSIONS.c.id == _JOBS.c.session_id, _SESSIONS.c.player_waiting_until > bindparam("b_now"))
_CLAIMABLE = select(_JOBS).where(_JOBS.c.status == "queued", ~_RUNTIME_BUSY, ~_PLAYER_WAITING)
_NEXT = _CLAIMABLE.order_by(_JOBS.c.enqueued_at, _JOBS.c.id).limit(1)
_NEXT_OF_SESSION = _CLAIMABLE.where(_JOBS.c.session_id == bindparam("b_session")).order_by(_JOBS.c.enqueued_at, _JOBS.c.id).limit(1)
# PostgreSQL: concurrent workers never wait on each other or take the same job.
_NEXT_LOCKED = _NEXT.with_for_update(skip_locked=True)
_NEXT_OF_SESSION_LOCKED = _NEXT_OF_SESSION.with_for_update(skip_locked=True)
_CLAIM = _JOBS.update().where(_JOBS.c.id == bindparam("b_id"))


def _lease_deadline(row: DetachedJobRow, now: datetime, ttl_ms: int) -> datetime:
    assert row.claimed_at is not None
    return min(now + timedelta(milliseconds=ttl_ms), row.claimed_at + timedelta(milliseconds=row.max_execution_ms))


def _held(db: Session, job_id: str, lease_id: str, now: datetime, policy: RetryPolicy) -> tuple[DetachedJobRow, str]:
    """The running job whose lease `lease_id` is, and "" — or the reason the lease is lost.

    A lapsed lease is recorded (timed-out, or the job retried) and the transaction commits that;
    the caller answers ABORTED with the reason afterwards. The row is read with Core into a transient
    DetachedJobRow (outside the ORM session); its changes are written with _write.
    """
    connection = db.connection()
    statement = _JOB_FOR_UPDATE if connection.dialect.name == "postgresql" else _JOB
    found = connection.execute(statement, {"b_id": job_id}).one_or_none()
    if found is None:
        raise not_found(f"detached job {job_id} not found", "covel.scheduler.v1.DetachedJob", job_id, reason="DETACHED_JOB_NOT_FOUND")
    row = DetachedJobRow(**found._mapping)
    if row.status != "running" or row.lease_id != lease_id:
        raise aborted(f"detached job {job_id} is {row.status}; lease {lease_id} is not held")
    if row.lease_deadline and now >= row.lease_deadline:
        if row.claimed_at and now >= row.claimed_at + timedelta(milliseconds=row.max_execution_ms):
            row.status, row.finished_at = "timed-out", now
            row.error = f"ran longer than maxExecutionMs ({row.max_execution_ms} ms)"
        else:
            retry_or_park(row, now, "its lease expired before the worker renewed it", policy)
        _write(db, row)
        return row, f"detached job {job_id} lost its lease, now {row.status}: {row.error}"
    return row, ""


def _write(db: Session, row: DetachedJobRow, columns: tuple[str, ...] = ()) -> None:
    """A held job's changes (`columns`, default every column a job's life changes), with a Core UPDATE."""
    db.connection().execute(_JOB_UPDATE, {"b_id": row.id, **{name: getattr(row, name) for name in columns or _CHANGING}})


def renew(db: Session, job_id: str, lease_id: str, ttl_ms: int, policy: RetryPolicy) -> tuple[store_pb2.DetachedJob, str]:
    now = utcnow()
    row, lost = _held(db, job_id, lease_id, now, policy)
    if not lost:
        row.lease_deadline = _lease_deadline(row, now, ttl_ms)
        _write(db, row, ("lease_deadline",))
    return job_to_proto(row), lost


def complete(db: Session, request: store_pb2.CompleteDetachedJobRequest, policy: RetryPolicy) -> tuple[store_pb2.DetachedJob, str]:
    now = utcnow()
    row, lost = _held(db, request.job_id, request.lease_id, now, policy)
    if not lost and request.status == "queued":
        # Released by a worker that stops: claimable again (attempts keeps counting this claim).
        row.status, row.lease_id, row.holder, row.claimed_at, row.lease_deadline = "queued", None, "", None, None
        _write(db, row)
    elif not lost and request.status == "retry":
        retry_or_park(row, now, request.error or "a passing failure", policy)
        _write(db, row)
    elif not lost:
        row.status, row.finished_at = request.status, now
        row.result = from_struct(request.result) if request.HasField("result") else None
        row.error = request.error
        _write(db, row)
    return job_to_proto(row), lost


# Built once: building a statement costs more than running it.
_JOB = select(_JOBS).where(_JOBS.c.id == bindparam("b_id"))
_JOB_FOR_UPDATE = _JOB.with_for_update()
_JOB_UPDATE = _JOBS.update().where(_JOBS.c.id == bindparam("b_id"))
# What a job's claim, renewals, completion and retries change.
_CHANGING = ("status", "lease_id", "holder", "claimed_at", "lease_deadline", "attempts", "result", "error", "finished_at", "not_before")


def list_jobs(db: Session, request: store_pb2.ListDetachedJobsRequest) -> store_pb2.ListDetachedJobsResponse:
    """Oldest first, a page at a time: one session's, or every session's (the operator's view)."""
    size, after = page_size(request.page_size, DEFAULT_PAGE, MAX_PAGE), decode_token(request.page_token)
    statement = select(DetachedJobRow)
    if request.session_id:
        find_session(db, request.session_id)
        statement = statement.where(DetachedJobRow.session_id == request.session_id)
    if request.statuses:
        statement = statement.where(DetachedJobRow.status.in_(list(request.statuses)))
    if after is not None:
        at, job_id = after
        statement = statement.where(or_(DetachedJobRow.enqueued_at > at, and_(DetachedJobRow.enqueued_at == at, DetachedJobRow.id > job_id)))
    rows = list(db.execute(statement.order_by(DetachedJobRow.enqueued_at, DetachedJobRow.id).limit(size + 1)).scalars())
    more = len(rows) > size
    rows = rows[:size]
    return store_pb2.ListDetachedJobsResponse(jobs=[job_to_proto(row) for row in rows],
                                              next_page_token=encode_token(rows[-1].enqueued_at, rows[-1].id) if more else "")


def requeue(db: Session, job_id: str) -> store_pb2.DetachedJob:
    """A job that ended without success queued again, attempts counted afresh (its session must still be active)."""
    row = db.get(DetachedJobRow, job_id)
    if row is None:
        raise not_found(f"detached job {job_id} not found", "covel.scheduler.v1.DetachedJob", job_id, reason="DETACHED_JOB_NOT_FOUND")
    if row.status not in REQUEUEABLE:
        raise failed_precondition(f"detached job {job_id} is {row.status}; only a job {', '.join(REQUEUEABLE)} can be queued again",
                                  reason="JOB_NOT_REQUEUEABLE", subject=f"detachedJobs/{job_id}")
    if find_session(db, row.session_id).status != "active":
        raise failed_precondition(f"detached job {job_id}: its session {row.session_id} has ended", reason="SESSION_ENDED",
                                  subject=f"sessions/{row.session_id}")
    now = utcnow()
    row.status, row.attempts, row.not_before, row.finished_at, row.result = "queued", 0, now, None, None
    row.error = f"queued again by an operator (was {row.error or 'no reason recorded'})"[:2000]
    db.flush()
    return job_to_proto(row)

"""CommitTurn: everything a turn proposes, in one database transaction.

Order inside the transaction (the session row locked, see database.read_locked_session):
1. A turn already recorded under this id, or under this idempotency key, is returned
   as it is (a retried commit); nothing is written again.
2. The caller's lease must still be held, else ABORTED and nothing is written. A turn that ran without the
   lease (a detached job) sends what it read: changed since, ABORTED (READ_CONFLICT), nothing written (read_checks.py).
3. The turn row is written. COMMITTED turns then append the player message and apply
   the proposals unit by unit (a unit = the proposals of one top-level runtime with its
   nested calls; producers before the units that need or read them, else in order of first
   appearance), each unit in its own savepoint:
   - a unit that hard-depends on (`needs`) or read data of (`read_from`) a discarded unit is
     discarded (`read data of <runtime> that did not commit` / `needs <runtime> that did not
     commit`), and so on transitively; a story or setup unit is kept instead and a
     `read-dependency.kept` entry goes into the turn's trace;
   - a non-story unit whose runtime failed (RuntimeResult.status "failed") is discarded;
   - a rejected proposal in a non-story unit rolls back that unit only (its other
     proposals DISCARDED); the story and the other units are kept;
   - a proposal the scheduler sent with a REJECTED outcome in Turn.proposal_outcomes (a
     PreStateCommit abort) is rejected here like a write the store refused: with the reason
     and code the scheduler gave, by the same unit rules (spec: 提交单元, any rejected write);
   - a rejected proposal in a story or setup unit rolls back every write of the turn: the
     turn is recorded as FAILED with the reason.
   ABORTED and FAILED turns write only the turn row; their proposals are DISCARDED.
   Every proposal gets an outcome (status, reason, code); every unit that did not commit is
   listed in Turn.discarded_units. The trace and discarded units are kept in turn_traces.
   Detached jobs are enqueued only when the turn ends COMMITTED (detached_jobs.enqueue), and only
   then are its dimension maintainers' settlement duties recorded (settlements.record).
   Interactions (interactions.py): a COMMITTED turn that answers an interaction no longer open (another
   turn answered it since the scheduler checked, or it is unknown) fails before its proposals are
   applied: FAILED with the reason, every proposal DISCARDED. A turn that ends COMMITTED closes the
   interactions it answers and records those its committed units asked as open.
4. Counters: message seq stays 1..n per session; a COMMITTED "player" turn adds one to
   completed_player_turns. The lease is released when asked.
5. A detached job's commit (`job`, job_commits.py) may take the lease itself before 1 (and release it at 4), and
   ends its job, when the turn is recorded COMMITTED and the job's claim still held, in the same transaction.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, and_, bindparam, or_, select
from sqlalchemy.orm import Session

from covel.store.v1 import store_pb2
from services.store import detached_jobs, interactions, job_commits, leases, read_checks, settlements, story_line
from services.store.commit_units import DISCARDED, Applied, apply_committed, group_units, outcome
from services.store.database import read_locked_session, write_session
from services.store.models import (
    DetachedJobRow,
    SessionRow,
    TurnLeaseRow,
    TurnRow,
    TurnTraceRow,
    utcnow,
)
from services.store.proto_mapping import (
    TURN_STATUS_NAME,
    from_timestamp,
    messages_to_json,
    outcome_to_json,
    session_to_proto,
    written_turn_to_proto,
)
from services.store.records import TurnRecord
from services.store.sessions import load_turn
from shared.errors import invalid_argument
from shared.structs import from_struct


def _recorded(db: Session, session: SessionRow, row: TurnRow, request: store_pb2.CommitTurnRequest, lease_id: str) -> store_pb2.CommitTurnResponse:
    if request.release_lease or request.job.take_lease:
        leases.release(db, request.session_id, lease_id)
    return store_pb2.CommitTurnResponse(turn=load_turn(db, row), session=session_to_proto(session))


def _lease_or_record(db: Session, session: SessionRow, request: store_pb2.CommitTurnRequest, ttl_ms: int) -> Any:
    """The lease the turn commits under (the caller's, still held, or one the job's commit takes), or the reply for a
    turn already recorded under its id or key (a retried commit: nothing is written again)."""
    taken = job_commits.take_lease(db, session, request, ttl_ms) if request.job.take_lease else None
    if isinstance(taken, store_pb2.CommitTurnResponse):
        return taken
    earlier = _earlier_record(db, session, request.turn)
    if earlier is not None:
        return _recorded(db, session, earlier, request, taken.lease_id if taken is not None else request.lease_id)
    return taken or _held_lease(db, session.id, request.lease_id)


def commit_turn(db: Session, request: store_pb2.CommitTurnRequest, queue_total: int | None = None,
                lease_ttl_ms: int = 0) -> store_pb2.CommitTurnResponse:
    """`request` is validated (validation.commit). Runs inside one write transaction. A detached job's commit that
    takes the lease (job.take_lease) takes it first, with the rules of its key (job_commits.py); LeaseBusy when busy."""
    session = read_locked_session(db, request.session_id)
    turn = request.turn
    lease = _lease_or_record(db, session, request, lease_ttl_ms)
    if isinstance(lease, store_pb2.CommitTurnResponse):
        return lease
    if turn.id != lease.turn_id:
        raise invalid_argument("turn.id", f"is {turn.id} but the lease runs turn {lease.turn_id}")
    if request.HasField("read_checks"):
        read_checks.check(db, session.id, request.read_checks)

    _off_the_line(db, turn)
    now = utcnow()
    proposal_ids = {proposal.id for proposal in request.proposals}
    # Outcomes decided before the store (e.g. a PreStateCommit veto) stay in the record.
    earlier_outcomes = [outcome for outcome in turn.proposal_outcomes if outcome.proposal_id not in proposal_ids]
    session.recorded_turns += 1
    row = _turn_row(session, lease.logical_turn, turn, now)
    connection = db.connection()
    connection.execute(_TURN_INSERT, _turn_values(row))

    answers = interactions.answers_of(turn) if turn.status == store_pb2.TURN_STATUS_COMMITTED else []
    refused = interactions.refusal(connection, session.id, answers) if answers else None
    if turn.status != store_pb2.TURN_STATUS_COMMITTED:
        applied = _discarded_all(request)
    elif refused is not None:
        applied = _failed_before_applying(request, *refused)
    else:
        applied = apply_committed(db, session, row, request)
    # The entries this commit adds after the turn's own.
    added_trace = list(applied.trace)
    if applied.failure:
        row.status, row.abort_reason, row.narrative = "failed", applied.failure, ""
    elif not row.narrative:
        row.narrative = "\n\n".join(message.text for message in applied.messages if message.role == "story")
    results_changed = _unshow_uncommitted(turn, row.status, applied.discarded_units)
    if row.status == "committed":
        if answers:
            interactions.answer(connection, session.id, row.id, answers, now)
        asked_trace, dropped = interactions.record(connection, session.id, row.id, row.record_seq, turn.runtime_results, now)
        added_trace.extend(asked_trace)
        results_changed = results_changed or dropped
    if results_changed:
        row.runtime_results = messages_to_json(turn.runtime_results)
        connection.execute(_TURN_RESULT, {"b_id": row.id, "runtime_results": row.runtime_results})
    jobs: list[DetachedJobRow] = []
    if row.status == "committed" and request.detached_jobs:
        jobs, job_trace = detached_jobs.enqueue(db, session.id, row.id, list(request.detached_jobs), now, queue_total)
        added_trace.extend(job_trace)
    if row.status == "committed" and request.settlements:
        added_trace.extend(settlements.record(connection, session.id, row.id, row.logical_turn, request.settlements,
                                              request.proposals, applied.outcomes, now))
    outcomes = [*earlier_outcomes, *(applied.outcomes[proposal.id] for proposal in request.proposals)]
    row.proposal_outcomes = [outcome_to_json(outcome) for outcome in outcomes]
    connection.execute(_TURN_RESULT, {"b_id": row.id, "status": row.status, "abort_reason": row.abort_reason, "narrative": row.narrative,
                                      "proposal_outcomes": row.proposal_outcomes})
    if turn.trace or added_trace or applied.discarded_units:
        connection.execute(_TRACE_INSERT, {"turn_id": row.id, "session_id": session.id,
                                           "entries": [*(from_struct(entry) for entry in turn.trace), *added_trace],
                                           "discarded_units": messages_to_json(applied.discarded_units)})
    _advance_session(session, row, request, now)
    story_line.after_commit(db, session, row)
    write_session(db, session, _ADVANCED)
    if request.release_lease or request.job.take_lease:
        leases.release(db, session.id, lease.lease_id)
    ended = job_commits.end_job(db, request.job, now) if request.job.job_id and row.status == "committed" else None
    db.flush()
    # The reply is what was written: nothing is read back.
    reply_turn = written_turn_to_proto(turn, row, applied.messages, added_trace, applied.discarded_units, applied.events, outcomes)
    return store_pb2.CommitTurnResponse(turn=reply_turn, session=session_to_proto(session), enqueued_jobs=[
        # One job per spec, in order: each with its spec's input as it came.
        detached_jobs.job_to_proto(job, spec.input) for job, spec in zip(jobs, request.detached_jobs, strict=False)],
                                        completed_job=ended)


# A declarative class with __tablename__ always maps a Table; DeclarativeBase types __table__ as any FromClause.
_TURNS = cast(Table, TurnRow.__table__)
# The session columns a commit changes (_advance_session, _apply_committed).
_ADVANCED = ("recorded_turns", "last_message_seq", "completed_player_turns", "player_messages", "phase", "setup_runtimes", "updated_at",
             "head_turn_id")
_TRACES = cast(Table, TurnTraceRow.__table__)


def _unshow_uncommitted(turn: store_pb2.Turn, status: str, discarded: list[store_pb2.DiscardedUnit]) -> bool:
    """A runtime whose unit did not commit (or of a turn that did not) shows the player nothing: its notifications,
    UI blocks and interactions are dropped from its result. Whether any was."""
    units = {unit.unit_runtime_id for unit in discarded}
    changed = False
    for result in turn.runtime_results:
        if (status != "committed" or result.runtime_id in units) and (result.notifications or result.ui or result.interactions):
            for name in ("notifications", "ui", "interactions"):
                result.ClearField(name)
            changed = True
    return changed


def _earlier_record(db: Session, session: SessionRow, turn: store_pb2.Turn) -> TurnRow | None:
    """The turn as already recorded (a retried commit): by its id, else by its idempotency key."""
    # No key matches nothing: turns without one store NULL.
    found = db.connection().execute(_EARLIER, {"b_id": turn.id, "b_session": session.id, "b_key": turn.idempotency_key}).all()
    if not found:
        return None
    by_id = next((row for row in found if row.id == turn.id), None)
    if by_id is not None and by_id.session_id != session.id:
        raise invalid_argument("turn.id", f"turn {turn.id} belongs to another session")
    return db.get(TurnRow, (by_id or found[0]).id)


def _off_the_line(db: Session, turn: store_pb2.Turn) -> None:
    """A follow-up (a detached job's, a settlement retry's, a resume's) of a turn a move took off the story's line
    commits nothing: it would write into a line that no longer has its source (story_line.py)."""
    if turn.status == store_pb2.TURN_STATUS_COMMITTED and turn.source_turn_id and not turn.version_of \
            and not story_line.follows_the_line(db, turn.source_turn_id):
        turn.status = store_pb2.TURN_STATUS_ABORTED
        turn.abort_reason = f"its source turn {turn.source_turn_id} is off the story's line (a rewind or another version was chosen)"


def _held_lease(db: Session, session_id: str, lease_id: str) -> Any:
    """(lease_id, turn_id, logical_turn) of the caller's lease, still held; ABORTED otherwise."""
    held = db.connection().execute(_LEASE, {"b_session": session_id}).one_or_none()
    if held is None or held.lease_id != lease_id:
        raise leases.lost(db, session_id, lease_id, "; nothing was written")
    return held


# Built once: building a statement costs more than running it.
_EARLIER = select(_TURNS.c.id, _TURNS.c.session_id).where(
    or_(_TURNS.c.id == bindparam("b_id"), and_(_TURNS.c.session_id == bindparam("b_session"), _TURNS.c.idempotency_key == bindparam("b_key")))
)
_LEASES = cast(Table, TurnLeaseRow.__table__)
_LEASE = select(_LEASES.c.lease_id, _LEASES.c.turn_id, _LEASES.c.logical_turn).where(_LEASES.c.session_id == bindparam("b_session"))
_TURN_RESULT = _TURNS.update().where(_TURNS.c.id == bindparam("b_id"))
_TURN_INSERT = _TURNS.insert()
_TURN_COLUMNS = tuple(column.name for column in _TURNS.columns)
_TRACE_INSERT = _TRACES.insert()


def _turn_row(session: SessionRow, logical_turn: int, turn: store_pb2.Turn, now: datetime) -> TurnRecord:
    """The turn as recorded (written with Core, kept for the reply)."""
    return TurnRecord(
        id=turn.id,
        session_id=session.id,
        record_seq=session.recorded_turns,
        logical_turn=logical_turn,
        status=TURN_STATUS_NAME[turn.status],
        idempotency_key=turn.idempotency_key or None,
        origin=turn.origin or "player",
        actions=messages_to_json(turn.actions),
        player_message=turn.player_message,
        narrative=turn.narrative,
        abort_reason=turn.abort_reason,
        runtime_results=messages_to_json(turn.runtime_results),
        proposal_outcomes=[],
        hook_trace=messages_to_json(turn.hook_trace),
        started_at=from_timestamp(turn.started_at, turn.HasField("started_at")),
        finished_at=from_timestamp(turn.finished_at, turn.HasField("finished_at")) or now,
        recorded_at=now,
        trace_id=turn.trace_id,
        source_turn_id=turn.source_turn_id or None,
        retryable=turn.retryable,
        parent_turn_id=session.head_turn_id,
        version_of=turn.version_of or None,
    )


def _turn_values(row: TurnRecord) -> dict[str, Any]:
    return {name: getattr(row, name) for name in _TURN_COLUMNS}


def _discarded_all(request: store_pb2.CommitTurnRequest, why: str = "", code: str = "turn-not-committed") -> Applied:
    """A turn that did not commit: every proposal and unit discarded, with why."""
    why = why or ("the turn was aborted" if request.turn.status == store_pb2.TURN_STATUS_ABORTED else "the turn failed")
    return Applied(
        outcomes={proposal.id: outcome(proposal.id, DISCARDED, why, code) for proposal in request.proposals},
        discarded_units=[store_pb2.DiscardedUnit(unit_runtime_id=unit.runtime_id, reason=why) for unit in group_units(request.proposals, set())],
    )


def _failed_before_applying(request: store_pb2.CommitTurnRequest, failure: str, entry: dict[str, Any]) -> Applied:
    """A turn that fails before its proposals are applied (it answers an interaction no longer open): every
    proposal and unit discarded, with why, as when a story unit's rejection rolls the turn back."""
    discarded = _discarded_all(request, f"the turn failed: {failure}", interactions.NOT_OPEN_CODE)
    discarded.trace, discarded.failure = [entry], failure
    return discarded


def _advance_session(session: SessionRow, row: TurnRecord, request: store_pb2.CommitTurnRequest, now: datetime) -> None:
    """Setup progress, the player-turn count and the phase after this turn."""
    if request.setup_progress:
        progress = dict(session.setup_runtimes or {})
        for runtime, value in request.setup_progress.items():
            entry = from_struct(value)
            if row.status != "committed" and entry.get("state") == "done":
                # The turn did not commit (rolled back here): its setup work did not happen.
                entry = {**{k: v for k, v in entry.items() if k == "version"}, "state": "pending",
                         "lastError": f"the turn did not commit: {row.abort_reason or 'it failed'}"}
            progress[runtime] = entry
        session.setup_runtimes = progress
    # Setup turns and the opening do not count as completed player turns; the turn that ends the setup
    # does when it also answered the player's own action.
    playing = session.phase == "playing" or (request.phase == "playing" and request.first_player_turn)
    if row.status == "committed" and row.origin == "player" and playing:
        session.completed_player_turns += 1
    if row.status == "committed" and request.phase == "playing" and session.phase != "playing":
        session.phase = "playing"
    session.updated_at = now

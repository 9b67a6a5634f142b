"""CommitTurn: everything a turn proposes, in one database transaction.

Order inside the transaction (the session row locked, see database.read_locked_session):
1. A turn already recorded under this id, or under this idempotency key, is returned
   as it is (a retried commit); nothing is written again.
2. The caller's lease must still be held, else ABORTED and nothing is written.
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
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, cast

from sqlalchemy import Table, and_, bindparam, or_, select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, SessionTransaction

from covel.store.v1 import store_pb2
from services.store import detached_jobs, interactions, leases, proposals, settlements
from services.store.database import read_locked_session, write_session
from services.store.datasets import dataset
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
from services.store.records import EventRecord, MessageRecord, TurnRecord
from services.store.sessions import load_turn
from shared.errors import invalid_argument, shortened
from shared.structs import from_struct

COMMITTED = store_pb2.PROPOSAL_STATUS_COMMITTED
REJECTED = store_pb2.PROPOSAL_STATUS_REJECTED
DISCARDED = store_pb2.PROPOSAL_STATUS_DISCARDED


@dataclass
class Unit:
    runtime_id: str
    story: bool
    proposals: list[store_pb2.Proposal]


Rejection = tuple[store_pb2.Proposal, str, str]  # (the rejected proposal, reason, code)


def unit_of(proposal: store_pb2.Proposal) -> str:
    return proposal.unit_runtime_id or proposal.runtime_id or proposal.plugin_id


def group_units(
    items: Iterable[store_pb2.Proposal], story_runtimes: set[str], dependencies: Iterable[store_pb2.UnitDependencies] = ()
) -> list[Unit]:
    """Units in order of first appearance; units named only in `dependencies` have no proposals
    but still take part in discard propagation."""
    units: dict[str, Unit] = {}
    for proposal in items:
        name = unit_of(proposal)
        if name not in units:
            units[name] = Unit(name, name in story_runtimes, [])
        units[name].proposals.append(proposal)
    for entry in dependencies:
        if entry.unit_runtime_id not in units:
            units[entry.unit_runtime_id] = Unit(entry.unit_runtime_id, entry.unit_runtime_id in story_runtimes, [])
    return list(units.values())


def unit_order(units: list[Unit], dependencies: Iterable[store_pb2.UnitDependencies]) -> list[Unit]:
    """Producers before the units that need or read them (stable; validation refused cycles)."""
    by_name = {unit.runtime_id: unit for unit in units}
    after = {entry.unit_runtime_id: [*entry.needs, *entry.read_from] for entry in dependencies}
    ordered: list[Unit] = []
    placed: set[str] = set()

    def place(unit: Unit, path: frozenset[str]) -> None:
        if unit.runtime_id in placed or unit.runtime_id in path:
            return
        for producer in after.get(unit.runtime_id, []):
            if producer in by_name:
                place(by_name[producer], path | {unit.runtime_id})
        placed.add(unit.runtime_id)
        ordered.append(unit)

    for unit in units:
        place(unit, frozenset())
    return ordered


def _outcome(proposal_id: str, status: store_pb2.ProposalStatus.ValueType, reason: str = "", code: str = "") -> store_pb2.ProposalOutcome:
    # A reason quotes the plugin's values and keys: never a megabyte of them (shared/errors.shortened).
    return store_pb2.ProposalOutcome(proposal_id=proposal_id, status=status, reason=shortened(reason), code=code)


def _recorded(db: Session, session: SessionRow, row: TurnRow, request: store_pb2.CommitTurnRequest) -> store_pb2.CommitTurnResponse:
    if request.release_lease:
        leases.release(db, request.session_id, request.lease_id)
    return store_pb2.CommitTurnResponse(turn=load_turn(db, row), session=session_to_proto(session))


@dataclass
class Applied:
    """What applying a turn's proposals decided: an outcome per proposal, the units that did not
    commit, the rows it appended, trace entries, and the failure when a story or setup unit's
    rejection failed the turn."""

    outcomes: dict[str, store_pb2.ProposalOutcome] = field(default_factory=dict)
    discarded_units: list[store_pb2.DiscardedUnit] = field(default_factory=list)
    messages: list[MessageRecord] = field(default_factory=list)
    events: list[EventRecord] = field(default_factory=list)
    trace: list[dict[str, Any]] = field(default_factory=list)
    failure: str = ""


def commit_turn(db: Session, request: store_pb2.CommitTurnRequest) -> store_pb2.CommitTurnResponse:
    """`request` is validated (validation.commit). Runs inside one write transaction."""
    session = read_locked_session(db, request.session_id)
    turn = request.turn
    earlier = _earlier_record(db, session, turn)
    if earlier is not None:
        return _recorded(db, session, earlier, request)
    lease = _held_lease(db, session.id, request.lease_id)
    if turn.id != lease.turn_id:
        raise invalid_argument("turn.id", f"is {turn.id} but the lease runs turn {lease.turn_id}")

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
        applied = _apply_committed(db, session, row, request)
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
        jobs, job_trace = detached_jobs.enqueue(db, session.id, row.id, list(request.detached_jobs), now)
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
    write_session(db, session, _ADVANCED)
    if request.release_lease:
        leases.release(db, session.id, lease.lease_id)
    db.flush()
    # The reply is what was written: nothing is read back.
    reply_turn = written_turn_to_proto(turn, row, applied.messages, added_trace, applied.discarded_units, applied.events, outcomes)
    return store_pb2.CommitTurnResponse(turn=reply_turn, session=session_to_proto(session), enqueued_jobs=[detached_jobs.job_to_proto(job) for job in jobs])


# A declarative class with __tablename__ always maps a Table; DeclarativeBase types __table__ as any FromClause.
_TURNS = cast(Table, TurnRow.__table__)
# The session columns a commit changes (_advance_session, _apply_committed).
_ADVANCED = ("recorded_turns", "last_message_seq", "completed_player_turns", "player_messages", "phase", "setup_runtimes", "updated_at")
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


def _turn_row(session: SessionRow, logical_turn: int, turn: store_pb2.Turn, now) -> TurnRecord:
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
    )


def _turn_values(row: TurnRecord) -> dict[str, Any]:
    return {name: getattr(row, name) for name in _TURN_COLUMNS}


def _discarded_all(request: store_pb2.CommitTurnRequest, why: str = "", code: str = "turn-not-committed") -> Applied:
    """A turn that did not commit: every proposal and unit discarded, with why."""
    why = why or ("the turn was aborted" if request.turn.status == store_pb2.TURN_STATUS_ABORTED else "the turn failed")
    return Applied(
        outcomes={proposal.id: _outcome(proposal.id, DISCARDED, why, code) for proposal in request.proposals},
        discarded_units=[store_pb2.DiscardedUnit(unit_runtime_id=unit.runtime_id, reason=why) for unit in group_units(request.proposals, set())],
    )


def _failed_before_applying(request: store_pb2.CommitTurnRequest, failure: str, entry: dict[str, Any]) -> Applied:
    """A turn that fails before its proposals are applied (it answers an interaction no longer open): every
    proposal and unit discarded, with why, as when a story unit's rejection rolls the turn back."""
    discarded = _discarded_all(request, f"the turn failed: {failure}", interactions.NOT_OPEN_CODE)
    discarded.trace, discarded.failure = [entry], failure
    return discarded


def _advance_session(session: SessionRow, row: TurnRecord, request: store_pb2.CommitTurnRequest, now) -> None:
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


@dataclass
class _Plan:
    """How the turn's units are applied: in dependency order, with the scheduler's vetoes."""

    player_message: str
    units: list[Unit]
    failed_runtimes: set[str]
    vetoes: dict[str, store_pb2.ProposalOutcome]
    dependencies: dict[str, store_pb2.UnitDependencies]

    @classmethod
    def of(cls, request: store_pb2.CommitTurnRequest) -> _Plan:
        turn = request.turn
        story_runtimes = {result.runtime_id for result in turn.runtime_results if result.story or result.setup}
        sent = {proposal.id for proposal in request.proposals}
        return cls(
            player_message=turn.player_message,
            units=unit_order(group_units(request.proposals, story_runtimes, request.dependencies), request.dependencies),
            failed_runtimes={result.runtime_id for result in turn.runtime_results if result.status == "failed"},
            # Rejections decided before the store (PreStateCommit aborts) count as rejected writes of their unit.
            vetoes={outcome.proposal_id: outcome for outcome in turn.proposal_outcomes if outcome.status == REJECTED and outcome.proposal_id in sent},
            dependencies={entry.unit_runtime_id: entry for entry in request.dependencies},
        )


def _apply_committed(db: Session, session: SessionRow, row: TurnRecord, request: store_pb2.CommitTurnRequest) -> Applied:
    """First with every buffered row written at the end, a few statements for the whole turn; if the
    database refuses one of them, again from the start writing as it goes, so the refusal falls on
    the proposal or unit that caused it."""
    plan = _Plan.of(request)
    applied = _apply_units(db, plan, _apply_context(db, session, row, request), careful=False)
    if applied is None:
        applied = _apply_units(db, plan, _apply_context(db, session, row, request), careful=True)
    assert applied is not None
    session.last_message_seq += len(applied.messages)
    session.player_messages = (session.player_messages or 0) + sum(1 for message in applied.messages if message.role == "player")
    return applied


def _apply_units(db: Session, plan: _Plan, context: proposals.ApplyContext, *, careful: bool) -> Applied | None:
    """Applies the units inside one savepoint (the whole turn's writes). Not careful: None when the
    database refused the buffered rows at the end (the savepoint rolled back)."""
    applied = Applied()
    discarded: dict[str, str] = {}
    whole_turn = _savepoint(db)
    # One read for the whole turn (the values units update); each unit's writes then update the view.
    context.prefetch([proposal for unit in plan.units for proposal in unit.proposals])
    if plan.player_message:
        context.append_message(role="player", text=plan.player_message)
        if careful:
            context.write_rows()
    for unit in plan.units:
        skipped = _skip_reason(unit, plan.dependencies.get(unit.runtime_id), discarded, plan.failed_runtimes, applied.trace)
        if skipped is not None:
            reason, code = skipped
            discarded[unit.runtime_id] = reason
            applied.outcomes.update({proposal.id: _outcome(proposal.id, DISCARDED, reason, code) for proposal in unit.proposals})
            continue
        rejected = _apply_unit(db, context, unit, plan.vetoes, careful=careful)
        if rejected is None:
            applied.outcomes.update({proposal.id: _outcome(proposal.id, COMMITTED) for proposal in unit.proposals})
            continue
        if unit.story:
            whole_turn.rollback()
            return _rolled_back_turn(plan.units, unit, rejected, applied.trace)
        _record_unit_rejection(applied, discarded, unit, rejected)
    if not careful:
        try:
            context.write_rows()
            context.data.flush_turn()
        except DBAPIError:
            whole_turn.rollback()
            return None
    whole_turn.commit()
    applied.messages, applied.events = context.appended, context.events
    applied.discarded_units = [store_pb2.DiscardedUnit(unit_runtime_id=name, reason=reason) for name, reason in discarded.items()]
    return applied


def _savepoint(db: Session) -> SessionTransaction:
    """A savepoint, begun now. The ORM emits SAVEPOINT only when the session's connection is next
    asked for, and the appliers write through the connection they were given at the start."""
    savepoint = db.begin_nested()
    db.connection()
    return savepoint


def _record_unit_rejection(applied: Applied, discarded: dict[str, str], unit: Unit, rejected: Rejection) -> None:
    bad, reason, code = rejected
    discarded[unit.runtime_id] = f"proposal {bad.id} ({bad.type}) was rejected: {reason}"
    applied.outcomes[bad.id] = _outcome(bad.id, REJECTED, reason, code)
    for proposal in unit.proposals:
        if proposal.id != bad.id:
            applied.outcomes[proposal.id] = _outcome(
                proposal.id, DISCARDED, f"unit {unit.runtime_id} rolled back: proposal {bad.id} was rejected", "unit-rolled-back"
            )


def _apply_context(db: Session, session: SessionRow, row: TurnRecord, request: store_pb2.CommitTurnRequest) -> proposals.ApplyContext:
    return proposals.ApplyContext(
        db=db,
        connection=db.connection(),
        session_id=session.id,
        turn_id=row.id,
        logical_turn=row.logical_turn,
        now=row.recorded_at,
        next_seq=session.last_message_seq + 1,
        datasets={
            (policy.plugin_id, policy.namespace): dataset(
                policy.plugin_id, policy.namespace, from_struct(policy.schema) if policy.HasField("schema") else None, list(policy.ops)
            )
            for policy in request.datasets
        },
        dimension_owners=frozenset(request.dimension_owners),
    )


def _skip_reason(
    unit: Unit,
    entry: store_pb2.UnitDependencies | None,
    discarded: dict[str, str],
    failed_runtimes: set[str],
    trace: list[dict[str, Any]],
) -> tuple[str, str] | None:
    """(reason, code) when the unit is discarded unapplied: a producer it needs or read did not commit, or its runtime failed.

    A story or setup unit is kept despite such producers (each one noted in the trace) and despite a failed runtime."""
    blockers = [] if entry is None else [
        *((producer, "needs") for producer in entry.needs if producer in discarded),
        *((producer, "read") for producer in entry.read_from if producer in discarded),
    ]
    if unit.story:
        trace.extend(
            {"code": "read-dependency.kept", "unit": unit.runtime_id, "producer": producer, "dependency": how,
             "message": f"{unit.runtime_id} {'read data of' if how == 'read' else 'needs'} {producer}, which did not commit; kept (story/setup)"}
            for producer, how in blockers
        )
        return None
    if blockers:
        producer, how = blockers[0]
        return (f"read data of {producer} that did not commit" if how == "read" else f"needs {producer} that did not commit"), "read-dependency"
    if unit.runtime_id in failed_runtimes:
        return f"runtime {unit.runtime_id} failed", "runtime-failed"
    return None


def _apply_unit(
    db: Session, context: proposals.ApplyContext, unit: Unit, vetoes: dict[str, store_pb2.ProposalOutcome], *, careful: bool
) -> Rejection | None:
    """Applies the unit's proposals; on the first rejection rolls the unit back and returns it.

    A savepoint only where the unit writes to the database as it goes (careful, or a world write):
    otherwise its rows are still in the context's buffers, and rolling back is forgetting them."""
    mark = context.mark()
    savepoint = _savepoint(db) if careful or any(proposal.type in proposals.WRITES_AT_ONCE for proposal in unit.proposals) else None
    rejected = _unit_rejection(context, unit, vetoes, careful=careful)
    if rejected is None:
        if savepoint is not None:
            savepoint.commit()
        return None
    if savepoint is not None:
        savepoint.rollback()
    context.rollback_to(mark)
    context.data.discard()
    return rejected


def _unit_rejection(
    context: proposals.ApplyContext, unit: Unit, vetoes: dict[str, store_pb2.ProposalOutcome], *, careful: bool
) -> Rejection | None:
    vetoed = next((proposal for proposal in unit.proposals if proposal.id in vetoes), None)
    if vetoed is not None:
        return vetoed, vetoes[vetoed.id].reason, vetoes[vetoed.id].code or "hook-aborted"
    for proposal in unit.proposals:
        try:
            proposals.apply(context, proposal)
            if careful:
                context.write_rows()
        except proposals.Rejected as error:
            return proposal, str(error), error.code
        except DBAPIError as error:
            return proposal, f"the database refused the write: {error.orig}", "database-refused"
    if not unit.proposals:
        return None
    if not careful:
        context.data.keep()
        return None
    try:
        context.data.flush()
    except DBAPIError as error:
        # Buffered plugin-data writes are written together: the unit's last proposal answers for them.
        return unit.proposals[-1], f"the database refused the unit's plugin data writes: {error.orig}", "database-refused"
    return None


def _rolled_back_turn(units: list[Unit], unit: Unit, rejected: Rejection, trace: list[dict[str, Any]]) -> Applied:
    """A story or setup unit's rejection fails the turn: the rejected proposal REJECTED, every other one DISCARDED."""
    bad, reason, code = rejected
    failure = f"story runtime {unit.runtime_id}: proposal {bad.id} ({bad.type}) was rejected: {reason}"
    every = [proposal for each in units for proposal in each.proposals]
    return Applied(
        outcomes={
            proposal.id: _outcome(proposal.id, REJECTED, reason, code)
            if proposal.id == bad.id
            else _outcome(proposal.id, DISCARDED, f"the turn rolled back: {failure}", "turn-rolled-back")
            for proposal in every
        },
        discarded_units=[store_pb2.DiscardedUnit(unit_runtime_id=each.runtime_id, reason=f"the turn rolled back: {failure}") for each in units],
        trace=trace,
        failure=failure,
    )

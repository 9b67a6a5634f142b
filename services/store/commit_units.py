"""The proposals of a committed turn applied unit by unit (the rules are in turn_commit.py's docstring):
a unit is the proposals of one top-level runtime with its nested calls; producers go before the units that
need or read them; each unit is rolled back alone unless it is the story's or the setup's, whose rejection
rolls the whole turn back."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, SessionTransaction

from covel.store.v1 import store_pb2
from services.store import apply_context, proposals
from services.store.datasets import dataset
from services.store.models import SessionRow
from services.store.records import EventRecord, MessageRecord, TurnRecord
from shared.errors import shortened
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


def outcome(proposal_id: str, status: store_pb2.ProposalStatus.ValueType, reason: str = "", code: str = "") -> store_pb2.ProposalOutcome:
    # A reason quotes the plugin's values and keys: never a megabyte of them (shared/errors.shortened).
    return store_pb2.ProposalOutcome(proposal_id=proposal_id, status=status, reason=shortened(reason), code=code)


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


def apply_committed(db: Session, session: SessionRow, row: TurnRecord, request: store_pb2.CommitTurnRequest) -> Applied:
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


def _apply_units(db: Session, plan: _Plan, context: apply_context.ApplyContext, *, careful: bool) -> Applied | None:
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
            applied.outcomes.update({proposal.id: outcome(proposal.id, DISCARDED, reason, code) for proposal in unit.proposals})
            continue
        rejected = _apply_unit(db, context, unit, plan.vetoes, careful=careful)
        if rejected is None:
            applied.outcomes.update({proposal.id: outcome(proposal.id, COMMITTED) for proposal in unit.proposals})
            continue
        if unit.story:
            whole_turn.rollback()
            return _rolled_back_turn(plan.units, unit, rejected, applied.trace)
        _record_unit_rejection(applied, discarded, unit, rejected)
    if not careful:
        try:
            context.write_rows()
            context.data.flush_turn()
        except DBAPIError as error:
            if error.connection_invalidated:
                # The connection was lost (a database restarting), not a row refused: the transaction is gone, and
                # the store answers UNAVAILABLE (database.py) rather than applying again on a dead connection.
                raise
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
    applied.outcomes[bad.id] = outcome(bad.id, REJECTED, reason, code)
    for proposal in unit.proposals:
        if proposal.id != bad.id:
            applied.outcomes[proposal.id] = outcome(
                proposal.id, DISCARDED, f"unit {unit.runtime_id} rolled back: proposal {bad.id} was rejected", "unit-rolled-back"
            )


def _apply_context(db: Session, session: SessionRow, row: TurnRecord, request: store_pb2.CommitTurnRequest) -> apply_context.ApplyContext:
    return apply_context.ApplyContext(
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
    db: Session, context: apply_context.ApplyContext, unit: Unit, vetoes: dict[str, store_pb2.ProposalOutcome], *, careful: bool
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
    context: apply_context.ApplyContext, unit: Unit, vetoes: dict[str, store_pb2.ProposalOutcome], *, careful: bool
) -> Rejection | None:
    vetoed = next((proposal for proposal in unit.proposals if proposal.id in vetoes), None)
    if vetoed is not None:
        return vetoed, vetoes[vetoed.id].reason, vetoes[vetoed.id].code or "hook-aborted"
    for proposal in unit.proposals:
        try:
            proposals.apply(context, proposal)
            if careful:
                context.write_rows()
        except apply_context.Rejected as error:
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
            proposal.id: outcome(proposal.id, REJECTED, reason, code)
            if proposal.id == bad.id
            else outcome(proposal.id, DISCARDED, f"the turn rolled back: {failure}", "turn-rolled-back")
            for proposal in every
        },
        discarded_units=[store_pb2.DiscardedUnit(unit_runtime_id=each.runtime_id, reason=f"the turn rolled back: {failure}") for each in units],
        trace=trace,
        failure=failure,
    )

"""Dimension settlement receipts (store.proto DimensionSettlement, table dimension_settlements).

A dimension maintainer is a post-turn runtime that settles the world's dimensions after a story
turn by committing a `dimension.update` (`updates: []` settles with no change). The scheduler
sends a turn's duties with its CommitTurn (`settlements`); only a turn that ends COMMITTED records
them (`record`, inside the commit's transaction):
- a turn's own duty (no `retry_from_turn_id`) that settled leaves nothing; one that did not keeps a
  `pending` receipt with the maintainer's input and why (`last_error`);
- a retry of an open receipt counts an attempt: settled closes it (`settled`, `resolved_turn_id`),
  else its `last_error` is the retry's; a retry of a receipt that is missing or closed changes nothing;
- each duty adds one `dimension-settlement` entry to the turn's trace.
A person closes an open receipt by hand (`resolve`: `handled` or `skipped`); a closed receipt is never
reopened. `pending_settlements` lists a session's open ones for the world model (turn_reads.world_model).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, bindparam, select
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from covel.store.v1 import store_pb2
from services.store.database import lock_session
from services.store.models import DimensionSettlementRow, utcnow
from services.store.proto_mapping import settlement_to_proto
from services.store.sessions import find_session
from shared.errors import failed_precondition, not_found, shortened
from shared.structs import from_struct

PENDING = "pending"
SETTLED = "settled"
# ListSettlements answers at most this many receipts.
LIST_MAX = 200
NOT_CALLED = "it finished without calling update-dimensions"
TRACE_CODE = "dimension-settlement"
_UPDATE = "dimension.update"
_COMMITTED = store_pb2.PROPOSAL_STATUS_COMMITTED


def record(
    connection: Connection,
    session_id: str,
    turn_id: str,
    logical_turn: int,
    duties: Iterable[store_pb2.SettlementDuty],
    proposals: Iterable[store_pb2.Proposal],
    outcomes: dict[str, store_pb2.ProposalOutcome],
    now: datetime,
) -> list[dict[str, Any]]:
    """Records a committed turn's duties (validation.commit checked them); the trace entries, one per duty.
    A settled own duty costs no statement."""
    updates = _maintainer_updates(proposals, outcomes)
    trace: list[dict[str, Any]] = []
    inserts: list[dict[str, Any]] = []
    for duty in duties:
        settled, rejection = updates.get((duty.plugin_id, duty.runtime_id), (False, ""))
        error = "" if settled else shortened(duty.error or rejection or NOT_CALLED)
        entry: dict[str, Any] = {"code": TRACE_CODE, "pluginId": duty.plugin_id, "runtimeId": duty.runtime_id,
                                 "state": SETTLED if settled else PENDING}
        if duty.retry_from_turn_id:
            entry.update(_retry(connection, session_id, turn_id, duty, settled, error, now))
        else:
            if not settled:
                inserts.append({"session_id": session_id, "source_turn_id": turn_id, "runtime_id": duty.runtime_id,
                                "source_logical_turn": logical_turn, "plugin_id": duty.plugin_id, "status": PENDING,
                                "last_error": error, "attempts": 0, "input": from_struct(duty.input), "resolved_turn_id": None,
                                "created_at": now, "updated_at": now})
                entry["error"] = error
            entry["message"] = (f"{duty.runtime_id} settled the world's dimensions" if settled else
                                f"{duty.runtime_id} did not settle the world's dimensions ({error}); its receipt stays pending")
        trace.append(entry)
    if inserts:
        connection.execute(_INSERT, inserts)
    return trace


def _maintainer_updates(
    proposals: Iterable[store_pb2.Proposal], outcomes: dict[str, store_pb2.ProposalOutcome]
) -> dict[tuple[str, str], tuple[bool, str]]:
    """(plugin, runtime) -> (one of its dimension.update proposals committed, why the first that did not was refused)."""
    found: dict[tuple[str, str], tuple[bool, str]] = {}
    for proposal in proposals:
        if proposal.type != _UPDATE:
            continue
        key = (proposal.plugin_id, proposal.runtime_id)
        outcome = outcomes.get(proposal.id)
        committed = outcome is not None and outcome.status == _COMMITTED
        settled, reason = found.get(key, (False, ""))
        found[key] = (settled or committed, reason or ("" if committed or outcome is None else outcome.reason))
    return found


def _retry(
    connection: Connection, session_id: str, turn_id: str, duty: store_pb2.SettlementDuty, settled: bool, error: str, now: datetime
) -> dict[str, Any]:
    """A retry of the source turn's receipt: the trace entry's fields past the common ones."""
    source = duty.retry_from_turn_id
    key = {"b_session": session_id, "b_source": source, "b_runtime": duty.runtime_id}
    receipt = connection.execute(_RECEIPT, key).one_or_none()
    if receipt is None or receipt.status != PENDING:
        state = "none" if receipt is None else receipt.status
        return {"state": "ignored", "retryFromTurnId": source,
                "message": f"turn {source} has no pending receipt of {duty.runtime_id} ({state}): the retry changed nothing"}
    attempts = receipt.attempts + 1
    if settled:
        connection.execute(_UPDATE_RECEIPT, {**key, "status": SETTLED, "attempts": attempts, "resolved_turn_id": turn_id, "updated_at": now})
        return {"retryFromTurnId": source, "attempts": attempts,
                "message": f"{duty.runtime_id} settled turn {source}'s receipt (attempt {attempts})"}
    connection.execute(_UPDATE_RECEIPT, {**key, "attempts": attempts, "last_error": error, "updated_at": now})
    return {"retryFromTurnId": source, "attempts": attempts, "error": error,
            "message": f"{duty.runtime_id} did not settle turn {source}'s receipt (attempt {attempts}): {error}"}


def pending_settlements(connection: Connection, session_id: str) -> list[store_pb2.DimensionSettlement]:
    """The session's open receipts, oldest source turn first (one indexed SELECT)."""
    return [settlement_to_proto(row) for row in connection.execute(_PENDING, {"b_session": session_id})]


def list_settlements(db: Session, request: store_pb2.ListSettlementsRequest) -> list[store_pb2.DimensionSettlement]:
    """Open receipts oldest first, then (include_closed) the closed ones newest first; at most LIST_MAX."""
    find_session(db, request.session_id)
    connection = db.connection()
    found = pending_settlements(connection, request.session_id)[:LIST_MAX]
    if request.include_closed and len(found) < LIST_MAX:
        rows = connection.execute(_CLOSED, {"b_session": request.session_id, "b_limit": LIST_MAX - len(found)})
        found.extend(settlement_to_proto(row) for row in rows)
    return found


def resolve(db: Session, request: store_pb2.ResolveSettlementRequest) -> store_pb2.DimensionSettlement:
    """Closes an open receipt by hand (validation.resolve_settlement checked the resolution)."""
    # Locked like a commit's: a retry settling the receipt at the same time waits, or goes first.
    lock_session(db, request.session_id)
    row = db.get(DimensionSettlementRow, (request.session_id, request.source_turn_id, request.runtime_id))
    if row is None:
        raise not_found(f"session {request.session_id} has no settlement receipt of turn {request.source_turn_id} "
                        f"for runtime {request.runtime_id}", "covel.scheduler.v1.DimensionSettlement",
                        f"{request.source_turn_id}/{request.runtime_id}", reason="SETTLEMENT_NOT_FOUND")
    if row.status != PENDING:
        raise failed_precondition(f"the settlement receipt of turn {row.source_turn_id} for runtime {row.runtime_id} is already "
                                  f"{row.status}: a closed receipt is never settled or resolved again",
                                  reason="SETTLEMENT_CLOSED", subject=f"settlements/{row.source_turn_id}/{row.runtime_id}")
    row.status, row.updated_at = request.resolution, utcnow()
    db.flush()
    return settlement_to_proto(row)


# A declarative class with __tablename__ always maps a Table; DeclarativeBase types __table__ as any FromClause.
_SETTLEMENTS = cast(Table, DimensionSettlementRow.__table__)
# Built once: building a statement costs more than running it.
_IN_SESSION = _SETTLEMENTS.c.session_id == bindparam("b_session")
_THE_RECEIPT = (_IN_SESSION, _SETTLEMENTS.c.source_turn_id == bindparam("b_source"), _SETTLEMENTS.c.runtime_id == bindparam("b_runtime"))
_INSERT = _SETTLEMENTS.insert()
_RECEIPT = select(_SETTLEMENTS.c.status, _SETTLEMENTS.c.attempts).where(*_THE_RECEIPT)
# SET the columns the parameters name.
_UPDATE_RECEIPT = _SETTLEMENTS.update().where(*_THE_RECEIPT)
_PENDING = (select(_SETTLEMENTS).where(_IN_SESSION, _SETTLEMENTS.c.status == PENDING)
            .order_by(_SETTLEMENTS.c.source_logical_turn, _SETTLEMENTS.c.created_at, _SETTLEMENTS.c.runtime_id))
_CLOSED = (select(_SETTLEMENTS).where(_IN_SESSION, _SETTLEMENTS.c.status != PENDING)
           .order_by(_SETTLEMENTS.c.source_logical_turn.desc(), _SETTLEMENTS.c.updated_at.desc(), _SETTLEMENTS.c.runtime_id)
           .limit(bindparam("b_limit")))

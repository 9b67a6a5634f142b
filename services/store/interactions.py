"""Interactions (store.proto Interaction and InteractionRecord, table interactions).

A runtime asks the player something (a form, a choice or a confirmation) on its
RuntimeResult.interactions; a player action answers one (PlayerAction.interaction). Only a turn that
ends COMMITTED changes them, inside the commit's transaction (turn_commit.commit_turn):
- `refusal`, before the turn's proposals are applied: every interaction the turn answers must still be
  open. The scheduler checked that before the turn ran, but another turn may have answered it since:
  one answered already, or unknown, fails the turn (FAILED with the reason, every proposal DISCARDED,
  an `interaction.not-open` trace entry), so nothing of it commits and nothing is asked or answered;
- `answer`, once the turn committed: each interaction it answers is closed (`answered`, the answer's
  values, the answering turn and time);
- `record`: every interaction the turn's committed units asked is recorded `open` (a unit that did
  not commit, or a turn that did not, asked nothing: turn_commit._unshow_uncommitted cleared them).
  An id already used in the session, or twice in the turn, drops the later one from its result with
  an `interaction.duplicate` trace entry; the commit goes on.
A turn that asks and answers nothing costs no statement. `open_interactions` lists a session's open
ones for the world model (turn_reads.world_model), `list_interactions` answers ListInteractions.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any, cast

from google.protobuf import json_format
from sqlalchemy import Table, bindparam, select
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from covel.store.v1 import store_pb2
from services.store.models import InteractionRow
from services.store.proto_mapping import interaction_to_proto
from services.store.sessions import find_session
from shared.structs import from_struct

OPEN = "open"
ANSWERED = "answered"
# ListInteractions answers at most this many.
LIST_MAX = 200
DUPLICATE = "interaction.duplicate"
NOT_OPEN = "interaction.not-open"
# The outcome code of the proposals of a turn that answered an interaction no longer open.
NOT_OPEN_CODE = "interaction-not-open"

Answer = tuple[str, dict[str, Any]]  # (interaction id, the answer's values)


def answers_of(turn: store_pb2.Turn) -> list[Answer]:
    """The interactions the turn's actions answer (validation.commit: each id once), with their values."""
    return [(action.interaction.id, from_struct(action.interaction.values)) for action in turn.actions if action.HasField("interaction")]


def refusal(connection: Connection, session_id: str, answers: list[Answer]) -> tuple[str, dict[str, Any]] | None:
    """Why the turn cannot answer `answers` (the first one not open any more, or unknown) and its trace
    entry; None when every one is open. One SELECT."""
    ids = [interaction_id for interaction_id, _ in answers]
    found = {row.interaction_id: row for row in connection.execute(_STATES, {"b_session": session_id, "b_ids": ids})}
    for interaction_id in ids:
        row = found.get(interaction_id)
        if row is None:
            reason, state = f"interaction {interaction_id} does not exist in this session", "none"
        elif row.status != OPEN:
            reason, state = f"interaction {interaction_id} was already answered (by turn {row.answered_turn_id})", row.status
        else:
            continue
        return reason, {"code": NOT_OPEN, "interactionId": interaction_id, "state": state, "message": f"the turn failed: {reason}"}
    return None


def answer(connection: Connection, session_id: str, turn_id: str, answers: list[Answer], now: datetime) -> None:
    """Closes the interactions a committed turn answered (`refusal` found them open, under the session's lock)."""
    connection.execute(_ANSWER, [{"b_session": session_id, "b_id": interaction_id, "status": ANSWERED, "answer": values,
                                  "answered_turn_id": turn_id, "answered_at": now} for interaction_id, values in answers])


def record(
    connection: Connection, session_id: str, turn_id: str, turn_seq: int, results: Iterable[store_pb2.RuntimeResult], now: datetime
) -> tuple[list[dict[str, Any]], bool]:
    """Records the interactions a committed turn's results still carry as open: the trace entries (one per
    duplicate dropped) and whether a duplicate was dropped from its result. None asked: no statement."""
    results = [result for result in results if result.interactions]
    if not results:
        return [], False
    ids = list({interaction.id for result in results for interaction in result.interactions})
    used = {row.interaction_id: row.turn_id for row in connection.execute(_USED, {"b_session": session_id, "b_ids": ids})}
    trace: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    for result in results:
        dropped: list[int] = []
        for index, interaction in enumerate(result.interactions):
            plugin_id, runtime_id = interaction.plugin_id or result.plugin_id, interaction.runtime_id or result.runtime_id
            if interaction.id in used:
                dropped.append(index)
                trace.append(_duplicate(interaction.id, plugin_id, runtime_id, used[interaction.id], turn_id))
                continue
            used[interaction.id] = turn_id
            stored = json_format.MessageToDict(interaction, preserving_proto_field_name=True)
            stored.update(plugin_id=plugin_id, runtime_id=runtime_id)
            rows.append({"session_id": session_id, "interaction_id": interaction.id, "turn_id": turn_id, "turn_seq": turn_seq,
                         "position": len(rows), "plugin_id": plugin_id, "runtime_id": runtime_id, "kind": interaction.kind,
                         "interaction": stored, "status": OPEN, "answer": None, "answered_turn_id": None, "created_at": now,
                         "answered_at": None})
        for index in reversed(dropped):
            del result.interactions[index]
    if rows:
        connection.execute(_INSERT, rows)
    return trace, bool(trace)


def _duplicate(interaction_id: str, plugin_id: str, runtime_id: str, kept_turn_id: str, turn_id: str) -> dict[str, Any]:
    where = "earlier in this turn" if kept_turn_id == turn_id else f"by turn {kept_turn_id}"
    return {"code": DUPLICATE, "interactionId": interaction_id, "pluginId": plugin_id, "runtimeId": runtime_id, "keptTurnId": kept_turn_id,
            "message": f"interaction {interaction_id} of {runtime_id} was dropped: the id was already used {where}"}


def open_interactions(connection: Connection, session_id: str) -> list[store_pb2.InteractionRecord]:
    """The session's open interactions, oldest first (one indexed SELECT)."""
    return [interaction_to_proto(row) for row in connection.execute(_OPEN, {"b_session": session_id})]


def list_interactions(db: Session, request: store_pb2.ListInteractionsRequest) -> list[store_pb2.InteractionRecord]:
    """The open interactions, and (include_answered) the answered ones, oldest first; at most LIST_MAX:
    every open one first, the newest answered ones fill the rest."""
    find_session(db, request.session_id)
    connection = db.connection()
    rows = list(connection.execute(_OPEN_AT_MOST, {"b_session": request.session_id, "b_limit": LIST_MAX}))
    if request.include_answered and len(rows) < LIST_MAX:
        rows.extend(connection.execute(_NEWEST_ANSWERED, {"b_session": request.session_id, "b_limit": LIST_MAX - len(rows)}))
        rows.sort(key=lambda row: (row.turn_seq, row.position))
    return [interaction_to_proto(row) for row in rows]


# A declarative class with __tablename__ always maps a Table; DeclarativeBase types __table__ as any FromClause.
_INTERACTIONS = cast(Table, InteractionRow.__table__)
# Built once: building a statement costs more than running it.
_IN_SESSION = _INTERACTIONS.c.session_id == bindparam("b_session")
_OF_IDS = _INTERACTIONS.c.interaction_id.in_(bindparam("b_ids", expanding=True))
_INSERT = _INTERACTIONS.insert()
_USED = select(_INTERACTIONS.c.interaction_id, _INTERACTIONS.c.turn_id).where(_IN_SESSION, _OF_IDS)
_STATES = select(_INTERACTIONS.c.interaction_id, _INTERACTIONS.c.status, _INTERACTIONS.c.answered_turn_id).where(_IN_SESSION, _OF_IDS)
# SET the columns the parameters name.
_ANSWER = _INTERACTIONS.update().where(_IN_SESSION, _INTERACTIONS.c.interaction_id == bindparam("b_id"), _INTERACTIONS.c.status == OPEN)
_OLDEST_FIRST = (_INTERACTIONS.c.turn_seq, _INTERACTIONS.c.position)
_OPEN = select(_INTERACTIONS).where(_IN_SESSION, _INTERACTIONS.c.status == OPEN).order_by(*_OLDEST_FIRST)
_OPEN_AT_MOST = _OPEN.limit(bindparam("b_limit"))
_NEWEST_ANSWERED = (select(_INTERACTIONS).where(_IN_SESSION, _INTERACTIONS.c.status != OPEN)
                    .order_by(_INTERACTIONS.c.turn_seq.desc(), _INTERACTIONS.c.position.desc()).limit(bindparam("b_limit")))

"""The story's line and the moves along it: rewind, choose a version, retry, branch.

Every committed turn records the session's head when it was recorded (`parent_turn_id`) and becomes the head;
its commit keeps a checkpoint of the state it left (checkpoints.py). The line is the head and its parents.
A move sets the head to another committed turn, in one transaction:
- turns off the new line (committed turns not on it, and every turn recorded after the head) are marked
  `off_line` and their messages `hidden`: kept as history, read by no turn and by no log page;
- the head's checkpoint is restored (plugin data, world, lorebook, exports, hook state, receipts, interactions,
  counters), so the next turn reads exactly the state the head committed;
- queued detached jobs of turns off the line are superseded; a job already running commits nothing (commit_turn
  asks `follows_the_line`).
A retry (AcquireTurnLease.retry_turn_id) moves the head to the retried turn's parent with the lease: the new turn
runs on the state before it and is recorded as a version of it (`version_of`: the first version); a retry that
does not commit puts the head back on the turn it retried. A branch copies the line up to a turn into a new session.
Moves by request id (rewind, version, branch) are recorded in story_moves: a resent request answers as the first.
"""

from __future__ import annotations

from typing import Any, cast

import grpc
from sqlalchemy import Table, and_, exists, or_, select, update
from sqlalchemy.orm import Session

from covel.store.v1 import store_pb2
from services.store import checkpoints
from services.store.database import read_locked_session, write_session
from services.store.models import (
    DetachedJobRow,
    MessageRow,
    SessionRow,
    StoryMoveRow,
    TurnEventRow,
    TurnLeaseRow,
    TurnRow,
    utcnow,
)
from services.store.proto_mapping import session_to_proto
from shared.errors import ServiceError, failed_precondition, not_found
from shared.ids import new_id

_TURNS = cast(Table, TurnRow.__table__)
_MESSAGES = cast(Table, MessageRow.__table__)
_JOBS = cast(Table, DetachedJobRow.__table__)
_MOVES = cast(Table, StoryMoveRow.__table__)
_EVENTS = cast(Table, TurnEventRow.__table__)
_LINE_COLUMNS = ("head_turn_id", *checkpoints.SESSION_COLUMNS, "updated_at")
# What walking the line reads of each turn (not its results and traces).
_LINE_FIELDS = tuple(_TURNS.c[name] for name in ("id", "parent_turn_id", "version_of", "origin", "status", "record_seq", "off_line"))
# The turns a retry runs again and whose versions a player chooses among.
STORY_ORIGINS = ("player", "continuation")


def _turn(db: Session, session_id: str, turn_id: str) -> Any:
    found = db.connection().execute(select(_TURNS).where(_TURNS.c.id == turn_id, _TURNS.c.session_id == session_id)).one_or_none()
    if found is None:
        raise not_found(f"turn {turn_id} not found in session {session_id}", "covel.scheduler.v1.Turn", turn_id, reason="TURN_NOT_FOUND")
    return found


def _refused(reason: str, turn_id: str, message: str) -> ServiceError:
    return failed_precondition(message, reason=reason, subject=f"turns/{turn_id}")


def line_of(db: Session, session_id: str, head_turn_id: str | None) -> list[Any]:
    """The committed turns of the line that ends at `head_turn_id`, first to last."""
    rows = {row.id: row for row in db.connection().execute(select(*_LINE_FIELDS).where(_TURNS.c.session_id == session_id)).all()}
    line: list[Any] = []
    current = rows.get(head_turn_id or "")
    while current is not None:
        line.append(current)
        current = rows.get(current.parent_turn_id or "")
    return line[::-1]


def _restorable(db: Session, session_id: str, turn_id: str) -> tuple[Any, dict[str, Any]]:
    turn = _turn(db, session_id, turn_id)
    state = checkpoints.state_of(db, turn_id) if turn.status == "committed" else None
    if state is None:
        raise _refused("TURN_NO_CHECKPOINT", turn_id, f"turn {turn_id} ({turn.status}) left no checkpoint to restore: "
                       "only committed turns recorded by this store version can be rewound to")
    return turn, state


def _no_running_turn(db: Session, session: SessionRow) -> None:
    lease = db.get(TurnLeaseRow, session.id)
    if lease is not None and lease.deadline > utcnow():
        raise ServiceError(grpc.StatusCode.ABORTED, f"session {session.id} has a turn running (turn {lease.turn_id}): a move waits for it to end",
                           reason="SESSION_BUSY", retry_after_ms=500)


def set_head(db: Session, session: SessionRow, turn_id: str) -> None:
    """Make `turn_id` the head: the line, the hidden messages, the state and the queue follow (module doc).
    The session row is locked by the caller, which writes it after (its columns in _LINE_COLUMNS)."""
    head, state = _restorable(db, session.id, turn_id)
    _apply_line(db, session, head, state)


def _apply_line(db: Session, session: SessionRow, head: Any | None, state: dict[str, Any]) -> None:
    """The line ending at `head` (None: no turn, the session as it started), with `state`."""
    on_line = [row.id for row in line_of(db, session.id, head.id)] if head is not None else []
    connection = db.connection()
    in_session = _TURNS.c.session_id == session.id
    connection.execute(update(_TURNS).where(in_session).values(off_line=False))
    after_head = _TURNS.c.record_seq > (head.record_seq if head is not None else 0)
    off = and_(in_session, _TURNS.c.id.not_in(on_line), or_(_TURNS.c.status == "committed", after_head))
    connection.execute(update(_TURNS).where(off).values(off_line=True))
    turn_off = exists().where(_TURNS.c.id == _MESSAGES.c.turn_id, _TURNS.c.off_line)
    connection.execute(update(_MESSAGES).where(_MESSAGES.c.session_id == session.id).values(hidden=turn_off))
    job_off = exists().where(_TURNS.c.id == _JOBS.c.turn_id, _TURNS.c.off_line)
    connection.execute(update(_JOBS).where(_JOBS.c.session_id == session.id, _JOBS.c.status == "queued", job_off)
                       .values(status="superseded", error="its turn is off the story's line (a rewind or another version)",
                               finished_at=utcnow()))
    checkpoints.restore(db, session, state)
    session.head_turn_id = head.id if head is not None else None
    session.updated_at = utcnow()


def _recorded_move(db: Session, session_id: str, request_id: str) -> Any:
    if not request_id:
        return None
    return db.connection().execute(select(_MOVES).where(_MOVES.c.session_id == session_id, _MOVES.c.request_id == request_id)).one_or_none()


def _note_move(db: Session, session_id: str, request_id: str, kind: str, turn_id: str, result_session_id: str = "") -> None:
    if request_id:
        db.connection().execute(_MOVES.insert(), {"session_id": session_id, "request_id": request_id, "kind": kind, "turn_id": turn_id,
                                                  "result_session_id": result_session_id, "created_at": utcnow()})


def move_head(db: Session, session_id: str, turn_id: str, request_id: str, move: str) -> SessionRow:
    """SetSessionHead: rewind to a turn of the line, or choose another version of the last turn."""
    session = read_locked_session(db, session_id)
    if _recorded_move(db, session_id, request_id) is None:
        _no_running_turn(db, session)
        _check_move(db, session, _turn(db, session_id, turn_id), move)
        set_head(db, session, turn_id)
        write_session(db, session, _LINE_COLUMNS)
        _note_move(db, session_id, request_id, "head", turn_id)
    return session


def last_story_turn(db: Session, session: SessionRow) -> Any | None:
    """The last player's (or continuation) turn of the line: the turn a retry runs again. The background, manual and
    action turns after it are its follow-ups; a retry or another version takes them off the line with it."""
    return next((row for row in reversed(line_of(db, session.id, session.head_turn_id)) if row.origin in STORY_ORIGINS), None)


def _check_move(db: Session, session: SessionRow, target: Any, move: str) -> None:
    if move == "rewind" and target.off_line:
        raise _refused("TURN_OFF_LINE", target.id, f"turn {target.id} is off the story's line: rewind to a turn on it, or choose this "
                       "version first if it is a version of the last turn")
    last = last_story_turn(db, session)
    if move == "version" and (last is None or (last.version_of or last.id) != (target.version_of or target.id)):
        raise _refused("TURN_NOT_LAST", target.id, f"turn {target.id} is not a version of the last turn of the story's line "
                       f"({last.id if last is not None else 'none yet'}): ListTurnVersions lists those")


def begin_retry(db: Session, session: SessionRow, retry_turn_id: str) -> None:
    """With the lease of a retry: the retried turn must be the head; the head moves to its parent (the state before it)."""
    turn = _turn(db, session.id, retry_turn_id)
    last = last_story_turn(db, session)
    if last is None or turn.id != last.id:
        raise _refused("TURN_NOT_LAST", turn.id, f"turn {turn.id} is not the last player's turn of the story's line"
                       f" (that is {last.id if last is not None else 'none yet'}): only it can be retried")
    if turn.parent_turn_id:
        set_head(db, session, turn.parent_turn_id)
    else:
        # The session's first turn: it runs again on the state the session started with.
        start = checkpoints.state_of(db, session.id)
        if start is None:
            raise _refused("TURN_NO_CHECKPOINT", turn.id, f"turn {turn.id} is the first turn of a session created before this store "
                           "kept the state sessions start with: it cannot be run again")
        _apply_line(db, session, None, start)
    connection = db.connection()
    connection.execute(update(_TURNS).where(_TURNS.c.id == turn.id).values(off_line=True))
    connection.execute(update(_MESSAGES).where(_MESSAGES.c.turn_id == turn.id).values(hidden=True))
    write_session(db, session, _LINE_COLUMNS)


def follows_the_line(db: Session, source_turn_id: str) -> bool:
    """A follow-up (a detached job's, a settlement retry's, a resume's) of a turn still on the line."""
    off = db.connection().execute(select(_TURNS.c.off_line).where(_TURNS.c.id == source_turn_id)).scalar_one_or_none()
    return not off


def after_commit(db: Session, session: SessionRow, row: Any) -> None:
    """At the end of a turn's commit: a committed turn follows the head, becomes it and keeps its checkpoint; a
    retry that did not commit puts the head back on the turn it retried."""
    if row.status == "committed":
        session.head_turn_id = row.id
        checkpoints.record(db, session, row.id)
    elif row.version_of and row.source_turn_id:
        set_head(db, session, row.source_turn_id)


def branch(db: Session, session_id: str, turn_id: str, request_id: str, owner: str) -> SessionRow:
    """BranchSession: a new session whose line is a copy of this one's up to `turn_id` and whose state is the one that
    turn left; the source session is not changed."""
    source = read_locked_session(db, session_id)
    recorded = _recorded_move(db, session_id, request_id)
    if recorded is not None:
        return read_locked_session(db, recorded.result_session_id)
    head, state = _restorable(db, session_id, turn_id)
    if head.off_line:
        raise _refused("TURN_OFF_LINE", turn_id, f"turn {turn_id} is off the story's line: choose it first, or branch from a turn on the line")
    now = utcnow()
    copy = SessionRow(**{column: getattr(source, column) for column in _COPIED_SESSION_COLUMNS}, id=new_id(), status="active",
                      owner=owner or source.owner, title=source.title, created_at=now, updated_at=now, recorded_turns=0,
                      last_message_seq=0, plugin_faults={}, player_waiting_until=None)
    db.add(copy)
    db.flush()
    turn_ids = _copy_line(db, source.id, copy, line_of(db, session_id, head.id))
    checkpoints.restore(db, copy, state, turn_ids, source_session_id=source.id)
    copy.head_turn_id = turn_ids[head.id]
    db.flush()
    _note_move(db, session_id, request_id, "branch", turn_id, copy.id)
    return copy


_COPIED_SESSION_COLUMNS = ("phase", "locale", "world_id", "active_plugins", "requested_plugins", "excluded_plugins", "approved_plugins",
                           "runtime_model_overrides", "plugin_settings", "setup_runtimes", "seats", "completed_player_turns", "player_messages")


def _copy_line(db: Session, source_id: str, copy: SessionRow, line: list[Any]) -> dict[str, str]:
    """The line's turns, their messages (with the session's opening) and events, and their checkpoints, into `copy`,
    under new ids; the map of old turn ids to new."""
    connection = db.connection()
    turn_ids = {row.id: new_id() for row in line}
    start = checkpoints.state_of(db, source_id)
    if start is not None:
        connection.execute(checkpoints.CHECKPOINTS.insert(), {"turn_id": copy.id, "session_id": copy.id, "state": _remapped(start, turn_ids)})
    full = {row.id: row for row in connection.execute(select(_TURNS).where(_TURNS.c.id.in_(list(turn_ids)))).all()}
    for seq, row in enumerate((full[light.id] for light in line), start=1):
        values = {**row._mapping, "id": turn_ids[row.id], "session_id": copy.id, "record_seq": seq, "idempotency_key": None,
                  "parent_turn_id": turn_ids.get(row.parent_turn_id or ""), "version_of": None, "off_line": False,
                  "source_turn_id": turn_ids.get(row.source_turn_id or "", row.source_turn_id)}
        connection.execute(_TURNS.insert(), values)
        state = checkpoints.state_of(db, row.id)
        if state is not None:
            connection.execute(checkpoints.CHECKPOINTS.insert(), {"turn_id": turn_ids[row.id], "session_id": copy.id,
                                                                  "state": _remapped(state, turn_ids)})
    messages = connection.execute(select(_MESSAGES).where(
        _MESSAGES.c.session_id == source_id, or_(_MESSAGES.c.turn_id.is_(None), _MESSAGES.c.turn_id.in_(list(turn_ids))))
        .order_by(_MESSAGES.c.seq)).all()
    for seq, message in enumerate(messages, start=1):
        connection.execute(_MESSAGES.insert(), {**message._mapping, "id": new_id(), "session_id": copy.id, "seq": seq, "hidden": False,
                                                "turn_id": turn_ids.get(message.turn_id or "")})
    events = connection.execute(select(_EVENTS).where(_EVENTS.c.turn_id.in_(list(turn_ids)))).all()
    for event in events:
        connection.execute(_EVENTS.insert(), {**event._mapping, "id": new_id(), "session_id": copy.id, "turn_id": turn_ids[event.turn_id]})
    copy.recorded_turns, copy.last_message_seq = len(line), len(messages)
    return turn_ids


def _remapped(state: dict[str, Any], turn_ids: dict[str, str]) -> dict[str, Any]:
    remapped: dict[str, Any] = {}
    for table, rows in state.items():
        if table == "session":
            remapped[table] = rows
            continue
        remapped[table] = [{name: turn_ids.get(value, value) if name in checkpoints.TURN_COLUMNS and isinstance(value, str) else value
                            for name, value in row.items()} for row in rows]
    return remapped


def move_head_reply(db: Session, request: store_pb2.SetSessionHeadRequest) -> store_pb2.Session:
    return session_to_proto(move_head(db, request.session_id, request.turn_id, request.request_id, request.move))


def branch_reply(db: Session, request: store_pb2.BranchSessionRequest) -> store_pb2.Session:
    return session_to_proto(branch(db, request.session_id, request.turn_id, request.request_id, request.owner))

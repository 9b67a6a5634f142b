"""Sessions and what they have recorded: create, read, the conversation log, turns, plugin data."""

from __future__ import annotations

import functools
from collections import defaultdict
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Select, Table, bindparam, false, or_, select
from sqlalchemy.orm import Session

from covel.store.v1 import store_pb2
from services.store import lorebook, seats
from services.store.database import lock_session, read_session, require_session
from services.store.models import (
    DetachedJobRow,
    MessageRow,
    PluginDataRow,
    SessionRow,
    TurnEventRow,
    TurnLeaseRow,
    TurnRow,
    TurnTraceRow,
    utcnow,
)
from services.store.proto_mapping import message_to_proto, plugin_data_to_proto, session_to_proto, turn_to_proto
from services.store.seats import guest_mark, seats_to_rows
from services.store.world_data_managed import KERNEL_PLUGIN
from shared.errors import failed_precondition, invalid_argument, not_found, session_not_found
from shared.ids import DETACHED_JOB_KEY_PREFIX, new_id
from shared.page_tokens import decode_position, encode_position, page_size
from shared.structs import from_struct


def create_session(db: Session, session: store_pb2.Session) -> store_pb2.Session:
    """`session` is validated (validation.new_session); the store assigns id, status and times."""
    now = utcnow()
    row = SessionRow(
        id=new_id(),
        status="active",
        phase=session.phase,
        locale=session.locale,
        world_id=session.world_id,
        title=session.title,
        active_plugins=list(session.active_plugins),
        requested_plugins=list(session.requested_plugins),
        excluded_plugins=list(session.excluded_plugins),
        approved_plugins=list(session.approved_plugins),
        runtime_model_overrides=dict(session.runtime_model_overrides),
        plugin_settings={plugin: from_struct(values) for plugin, values in session.plugin_settings.items()},
        setup_runtimes={runtime: from_struct(progress) for runtime, progress in session.setup_runtimes.items()},
        owner=session.owner,
        seats=seats_to_rows(list(session.seats)),
        completed_player_turns=0,
        player_messages=0,
        last_message_seq=0,
        recorded_turns=0,
        created_at=now,
        updated_at=now,
    )
    db.add(row)
    db.flush()
    return session_to_proto(row)


def find_session(db: Session, session_id: str) -> SessionRow:
    row = db.get(SessionRow, session_id)
    if row is None:
        raise session_not_found(session_id)
    return row


def get_session(db: Session, session_id: str, owner: str = "", or_guest: bool = False) -> store_pb2.Session:
    """The session; with `owner`, only if that principal owns it, or with `or_guest` took one of its seats (NOT_FOUND alike
    for a missing one and another's: one query either way)."""
    if not owner:
        return session_to_proto(read_session(db, session_id))
    member = SessionRow.owner == owner
    if or_guest:
        member = or_(member, SessionRow.seat_guests.contains(guest_mark(owner), autoescape=True))
    row = db.execute(select(SessionRow).where(SessionRow.id == session_id, member)).scalar_one_or_none()
    if row is None:
        raise session_not_found(session_id)
    return session_to_proto(row)


MESSAGES_PAGE = 1000
TURNS_PAGE, TURNS_PAGE_MAX = 100, 500


def list_messages(db: Session, request: store_pb2.ListMessagesRequest) -> store_pb2.ListMessagesResponse:
    """The newest `limit` messages; or, without a limit, a page of them oldest first (keyset on seq). Core statements
    built once, rows mapped straight to protos."""
    require_session(db, request.session_id)
    connection = db.connection()
    if request.limit > 0:
        rows = list(connection.execute(_NEWEST_MESSAGES, {"b_session": request.session_id, "b_limit": request.limit}))
        rows.reverse()
        return store_pb2.ListMessagesResponse(messages=[message_to_proto(row) for row in rows])
    size, after = page_size(request.page_size, MESSAGES_PAGE, MESSAGES_PAGE), decode_position(request.page_token)
    rows = list(connection.execute(_MESSAGES_PAGE, {"b_session": request.session_id, "b_after": after or 0, "b_limit": size + 1}))
    more = len(rows) > size
    rows = rows[:size]
    return store_pb2.ListMessagesResponse(messages=[message_to_proto(row) for row in rows],
                                          next_page_token=encode_position(rows[-1].seq) if more else "")


# A declarative class with __tablename__ always maps a Table; DeclarativeBase types __table__ as any FromClause.
_MESSAGES = cast(Table, MessageRow.__table__)
# `metadata` is labelled `meta`, as the ORM names it (message_to_proto reads either).
_MESSAGE_COLUMNS = [column.label("meta") if column.name == "metadata" else column for column in _MESSAGES.columns]
# Messages of turns off the story's line are hidden (story_line.py); GetTurn still shows a turn's own.
_VISIBLE = select(*_MESSAGE_COLUMNS).where(_MESSAGES.c.session_id == bindparam("b_session"), _MESSAGES.c.hidden == false())
_NEWEST_MESSAGES = _VISIBLE.order_by(_MESSAGES.c.seq.desc()).limit(bindparam("b_limit"))
# Seqs start at 1: after 0 is the first page.
_MESSAGES_PAGE = _VISIBLE.where(_MESSAGES.c.seq > bindparam("b_after")).order_by(_MESSAGES.c.seq).limit(bindparam("b_limit"))


def turn_messages(db: Session, turn_id: str) -> list[MessageRow]:
    return list(db.execute(select(MessageRow).where(MessageRow.turn_id == turn_id).order_by(MessageRow.seq)).scalars())


def turn_events(db: Session, turn_id: str) -> list[TurnEventRow]:
    return list(db.execute(select(TurnEventRow).where(TurnEventRow.turn_id == turn_id).order_by(TurnEventRow.seq)).scalars())


def load_turn(db: Session, row: TurnRow) -> store_pb2.Turn:
    return turn_to_proto(row, turn_messages(db, row.id), db.get(TurnTraceRow, row.id), turn_events(db, row.id))


def get_turn(db: Session, session_id: str, turn_id: str) -> store_pb2.Turn:
    require_session(db, session_id)
    row = db.get(TurnRow, turn_id)
    if row is None or row.session_id != session_id:
        raise not_found(f"turn {turn_id} not found in session {session_id}", "covel.scheduler.v1.Turn", turn_id, reason="TURN_NOT_FOUND")
    return load_turn(db, row)


def list_turns(db: Session, request: store_pb2.ListTurnsRequest) -> store_pb2.ListTurnsResponse:
    """A page of recorded turns (oldest or newest first, keyset on record_seq), each with the messages it appended."""
    require_session(db, request.session_id)
    size, after = page_size(request.page_size, TURNS_PAGE, TURNS_PAGE_MAX), decode_position(request.page_token)
    statement = select(TurnRow).where(TurnRow.session_id == request.session_id)
    order = TurnRow.record_seq.desc() if request.newest_first else TurnRow.record_seq
    if after is not None:
        statement = statement.where(TurnRow.record_seq < after if request.newest_first else TurnRow.record_seq > after)
    rows = list(db.execute(statement.order_by(order).limit(size + 1)).scalars())
    more = len(rows) > size
    rows = rows[:size]
    ids = [row.id for row in rows]
    by_turn: dict[str, list[MessageRow]] = defaultdict(list)
    for message in db.execute(select(MessageRow).where(MessageRow.turn_id.in_(ids)).order_by(MessageRow.seq)).scalars():
        by_turn[message.turn_id or ""].append(message)
    traces = {trace.turn_id: trace for trace in db.execute(select(TurnTraceRow).where(TurnTraceRow.turn_id.in_(ids))).scalars()}
    events: dict[str, list[TurnEventRow]] = defaultdict(list)
    for event in db.execute(select(TurnEventRow).where(TurnEventRow.turn_id.in_(ids)).order_by(TurnEventRow.seq)).scalars():
        events[event.turn_id].append(event)
    turns = [turn_to_proto(row, by_turn.get(row.id, ()), traces.get(row.id), events.get(row.id, ())) for row in rows]
    return store_pb2.ListTurnsResponse(turns=turns, next_page_token=encode_position(rows[-1].record_seq) if more else "")


def running_turn(db: Session, session_id: str) -> store_pb2.GetRunningTurnResponse:
    require_session(db, session_id)
    lease = db.get(TurnLeaseRow, session_id)
    if lease is None or lease.deadline <= utcnow():
        return store_pb2.GetRunningTurnResponse()
    return store_pb2.GetRunningTurnResponse(turn_id=lease.turn_id, logical_turn=lease.logical_turn)


def list_plugin_data(db: Session, request: store_pb2.ListPluginDataRequest) -> list[store_pb2.PluginDataEntry]:
    """Core rows mapped straight to protos (memory search lists a namespace that grows every turn: the ORM's
    identity map and row objects cost more than the read)."""
    connection = db.connection()
    if connection.execute(_SESSION_EXISTS, {"b_session": request.session_id}).first() is None:
        raise session_not_found(request.session_id)
    parameters = {"b_session": request.session_id, "b_plugin": request.plugin_id, "b_namespace": request.namespace, "b_key": request.key}
    statement = _plugin_data_listing(bool(request.plugin_id), bool(request.namespace), bool(request.key))
    return [plugin_data_to_proto(row) for row in connection.execute(statement, parameters)]


_PLUGIN_DATA = cast(Table, PluginDataRow.__table__)
_SESSION_EXISTS = select(SessionRow.id).where(SessionRow.id == bindparam("b_session"))


@functools.cache
def _plugin_data_listing(by_plugin: bool, by_namespace: bool, by_key: bool) -> Select[Any]:
    """ListPluginData's statement for the filters given, built once (building costs more than running it)."""
    columns = _PLUGIN_DATA.c
    # The kernel's own partition (which records the world gave the session) is listed only when asked for by name.
    where = [columns.session_id == bindparam("b_session"),
             columns.plugin_id == bindparam("b_plugin") if by_plugin else columns.plugin_id != KERNEL_PLUGIN]
    if by_namespace:
        where.append(columns.namespace == bindparam("b_namespace"))
    if by_key:
        where.append(columns.key == bindparam("b_key"))
    return select(_PLUGIN_DATA).where(*where).order_by(columns.plugin_id, columns.namespace, columns.key)


def update_approvals(db: Session, request: store_pb2.UpdateSessionApprovalsRequest) -> store_pb2.Session:
    """Approve (only plugins active in the session; no duplicates kept) and revoke plugins' server code."""
    row = lock_session(db, request.session_id)
    active = set(row.active_plugins)
    for index, plugin_id in enumerate(request.approve):
        if plugin_id not in active:
            raise invalid_argument(f"approve[{index}]", f"{plugin_id!r} is not active in session {row.id}")
    revoked = set(request.revoke)
    approved = [plugin_id for plugin_id in row.approved_plugins if plugin_id not in revoked]
    approved += [plugin_id for plugin_id in request.approve if plugin_id not in approved]
    if approved != list(row.approved_plugins):
        row.approved_plugins = approved
        row.updated_at = utcnow()
        db.flush()
    return session_to_proto(row)


def end_session(db: Session, session_id: str, reason: str) -> tuple[store_pb2.Session | None, bool]:
    """Mark the session ended, or delete it (its rows cascade). A player's running turn must finish
    first; a detached job does not hold the session open: it is cancelled (its lease goes, so it
    commits nothing), and so are the session's queued jobs."""
    row = lock_session(db, session_id)
    lease = db.get(TurnLeaseRow, session_id)
    now = utcnow()
    if lease is not None and lease.deadline > now and not _held_by_detached_job(db, lease):
        raise failed_precondition(
            f"session {session_id} has a turn running (turn {lease.turn_id}); cancel it or let it finish, then end the session",
            reason="TURN_RUNNING", subject=f"sessions/{session_id}",
        )
    if lease is not None:
        db.delete(lease)
    _cancel_detached_jobs(db, session_id, now)
    if reason == "deleted":
        db.delete(row)
        db.flush()
        return None, True
    changed = row.status != "ended"
    row.status = "ended"
    row.updated_at = utcnow()
    db.flush()
    return session_to_proto(row), changed


def rename_session(db: Session, session_id: str, title: str) -> tuple[store_pb2.Session, bool]:
    """Give the session another title (an ended one too); the same title again changes nothing, not even updated_at."""
    row = lock_session(db, session_id)
    if row.title == title:
        return session_to_proto(row), False
    row.title = title
    row.updated_at = utcnow()
    db.flush()
    return session_to_proto(row), True


def _held_by_detached_job(db: Session, lease: TurnLeaseRow) -> bool:
    """Whether a running detached job of the lease's session holds it (not a client's look-alike key)."""
    key = lease.idempotency_key or ""
    if not key.startswith(DETACHED_JOB_KEY_PREFIX):
        return False
    job = db.get(DetachedJobRow, key.removeprefix(DETACHED_JOB_KEY_PREFIX))
    return job is not None and job.session_id == lease.session_id and job.status == "running"


def _cancel_detached_jobs(db: Session, session_id: str, now: datetime) -> None:
    pending = select(DetachedJobRow).where(
        DetachedJobRow.session_id == session_id, DetachedJobRow.status.in_(("queued", "running"))
    )
    for job in db.execute(pending).scalars():
        job.status, job.error, job.finished_at = "cancelled", "the session ended", now
    db.flush()



def set_seat_character(db: Session, request: store_pb2.SetSeatCharacterRequest) -> store_pb2.Session:
    return session_to_proto(seats.switch_character(db, request))


def update_session_plugins(db: Session, request: store_pb2.UpdateSessionPluginsRequest) -> store_pb2.Session:
    """The scheduler's new resolution of a running session's plugins (validation.session_plugins checked the lists)."""
    row = find_session(db, request.session_id)
    if row.status != "active":
        raise failed_precondition(f"session {row.id} has ended; its plugins do not change", reason="SESSION_ENDED", subject=f"sessions/{row.id}")
    row.active_plugins = list(request.active_plugins)
    row.requested_plugins = list(request.requested_plugins)
    row.excluded_plugins = list(request.excluded_plugins)
    row.updated_at = utcnow()
    db.flush()
    return session_to_proto(row)


def put_lorebook_entry(db: Session, request: store_pb2.PutLorebookEntryRequest) -> store_pb2.LorebookEntry:
    row = find_session(db, request.session_id)
    if row.status != "active":
        raise failed_precondition(f"session {row.id} has ended; its lorebook does not change", reason="SESSION_ENDED",
                                  subject=f"sessions/{row.id}")
    return lorebook.put_entry(db, row.id, request.entry, None, utcnow())


def delete_lorebook_entry(db: Session, request: store_pb2.DeleteLorebookEntryRequest) -> bool:
    row = find_session(db, request.session_id)
    if row.status != "active":
        raise failed_precondition(f"session {row.id} has ended; its lorebook does not change", reason="SESSION_ENDED",
                                  subject=f"sessions/{row.id}")
    return lorebook.delete_entry(db, row.id, request.owner, request.id)

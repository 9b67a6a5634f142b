"""The store's tables as typed SQLAlchemy models.

Migrations (services/store/migrations) create exactly these tables; a test checks that
the migrated schema and these models agree. Times are always timezone-aware UTC in
Python, whatever the backend keeps. Structured fields are JSON (JSONB on PostgreSQL).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    false,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

ID = String(36)
# JSON on every backend, JSONB on PostgreSQL (indexable, compact, key order not kept).
Json = JSON().with_variant(JSONB(), "postgresql")


class UtcDateTime(TypeDecorator[datetime]):
    """Aware UTC datetimes in and out; SQLite keeps them as naive UTC text."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the store; use an aware UTC datetime")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def utcnow() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    type_annotation_map: ClassVar[dict[Any, Any]] = {datetime: UtcDateTime(), dict[str, Any]: Json, list[Any]: Json}


class SessionRow(Base):
    __tablename__ = "sessions"
    # ListSessions: one owner's sessions by last activity (migration 0014).
    __table_args__ = (Index("ix_sessions_owner_updated_at", "owner", "updated_at"),)

    id: Mapped[str] = mapped_column(ID, primary_key=True)
    # "active" or "ended".
    status: Mapped[str] = mapped_column(String(16))
    # "setup" or "playing".
    phase: Mapped[str] = mapped_column(String(16))
    locale: Mapped[str] = mapped_column(String(35))
    world_id: Mapped[str] = mapped_column(String(200), default="")
    title: Mapped[str] = mapped_column(Text, default="")
    active_plugins: Mapped[list[Any]] = mapped_column(default=list)
    requested_plugins: Mapped[list[Any]] = mapped_column(default=list)
    excluded_plugins: Mapped[list[Any]] = mapped_column(default=list)
    approved_plugins: Mapped[list[Any]] = mapped_column(default=list)
    runtime_model_overrides: Mapped[dict[str, Any]] = mapped_column(default=dict)
    # The world's lorebookSettings, camelCase; None: the defaults (migration 0021).
    lorebook_settings: Mapped[dict[str, Any] | None] = mapped_column(default=None)
    plugin_settings: Mapped[dict[str, Any]] = mapped_column(default=dict)
    # runtime id -> {state, resolution?, warning?, reason?, lastError?} (migration 0003).
    setup_runtimes: Mapped[dict[str, Any]] = mapped_column(default=dict, server_default=text("'{}'"))
    # The principal that created it (migration 0007); "" on older sessions.
    owner: Mapped[str] = mapped_column(String(200), default="", server_default="")
    # [{id, role, characterId, characterIds}] (migration 0009; services/store/seats.py).
    seats: Mapped[list[Any]] = mapped_column(default=list, server_default=text("'[]'"))
    # ",alice,bob,": the seats' guests, for GetSession(or_guest) in one query (0023; services/store/seat_grants.py).
    seat_guests: Mapped[str] = mapped_column(Text, default="", server_default="")
    completed_player_turns: Mapped[int] = mapped_column(BigInteger, default=0)
    # The seq of the newest message (messages are numbered 1..n per session, no gaps).
    last_message_seq: Mapped[int] = mapped_column(BigInteger, default=0)
    # How many turns were recorded (orders ListTurns; aborted turns count too).
    recorded_turns: Mapped[int] = mapped_column(BigInteger, default=0)
    # Player messages in the log (setup answers included): a tool's context.turn_number.
    player_messages: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    # 0016: the fault breaker's state, by plugin id: {"at": [fault times, epoch s]} counting, or
    # {"paused": {reason, faults, pausedAt, turnId}} (services/store/plugin_faults.py).
    plugin_faults: Mapped[dict[str, Any]] = mapped_column(default=dict, server_default=text("'{}'"))
    # 0020: a player's turn waits for the lease until about then: detached work of the session waits behind it.
    player_waiting_until: Mapped[datetime | None] = mapped_column(default=None)
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    # 0021: the committed turn the story's line ends at (services/store/story_line.py); None before any.
    head_turn_id: Mapped[str | None] = mapped_column(ID, default=None)


class TurnRow(Base):
    __tablename__ = "turns"
    __table_args__ = (
        # NULL keys (no idempotency key) never collide, on SQLite and PostgreSQL alike.
        UniqueConstraint("session_id", "idempotency_key", name="uq_turns_session_idempotency_key"),
        UniqueConstraint("session_id", "record_seq", name="uq_turns_session_record_seq"),
    )

    id: Mapped[str] = mapped_column(ID, primary_key=True)
    session_id: Mapped[str] = mapped_column(ID, ForeignKey("sessions.id", ondelete="CASCADE"))
    # Position among the session's recorded turns, starting at 1.
    record_seq: Mapped[int] = mapped_column(BigInteger)
    logical_turn: Mapped[int] = mapped_column(BigInteger)
    # "committed", "aborted" or "failed".
    status: Mapped[str] = mapped_column(String(16))
    idempotency_key: Mapped[str | None] = mapped_column(String(128))
    # "player", "continuation", "manual", "background", "action" or "settlement".
    origin: Mapped[str] = mapped_column(String(32))
    actions: Mapped[list[Any]] = mapped_column(default=list)
    player_message: Mapped[str] = mapped_column(Text, default="")
    narrative: Mapped[str] = mapped_column(Text, default="")
    abort_reason: Mapped[str] = mapped_column(Text, default="")
    runtime_results: Mapped[list[Any]] = mapped_column(default=list)
    proposal_outcomes: Mapped[list[Any]] = mapped_column(default=list)
    hook_trace: Mapped[list[Any]] = mapped_column(default=list)
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    recorded_at: Mapped[datetime]
    # 0006: the OpenTelemetry trace of the execution ("" while tracing is off), and for a detached
    # job's background turn the turn that queued it.
    trace_id: Mapped[str] = mapped_column(String(32), default="")
    source_turn_id: Mapped[str | None] = mapped_column(ID)
    # 0015: a failed turn a retry with its idempotency key runs again (Turn.retryable).
    retryable: Mapped[bool] = mapped_column(default=False, server_default=false())
    # 0021 (services/store/story_line.py): the head it followed; a retry's first version; off the line (kept as history).
    parent_turn_id: Mapped[str | None] = mapped_column(ID, default=None)
    version_of: Mapped[str | None] = mapped_column(ID, default=None)
    off_line: Mapped[bool] = mapped_column(default=False, server_default=false())


class MessageRow(Base):
    __tablename__ = "messages"
    __table_args__ = (
        UniqueConstraint("session_id", "seq", name="uq_messages_session_seq"),
        # A turn's history window: the latest summary, the Nth-last player message (turn_reads.py).
        Index("ix_messages_session_role_seq", "session_id", "role", "seq"),
    )

    id: Mapped[str] = mapped_column(ID, primary_key=True)
    session_id: Mapped[str] = mapped_column(ID, ForeignKey("sessions.id", ondelete="CASCADE"))
    turn_id: Mapped[str | None] = mapped_column(ID, ForeignKey("turns.id", ondelete="CASCADE"), index=True)
    seq: Mapped[int] = mapped_column(BigInteger)
    # "player", "story", "system" or "summary" (history compaction).
    role: Mapped[str] = mapped_column(String(16))
    plugin_id: Mapped[str] = mapped_column(String(200), default="")
    runtime_id: Mapped[str] = mapped_column(String(200), default="")
    text: Mapped[str] = mapped_column(Text, default="")
    # `metadata` is taken by the declarative base, so the attribute is `meta`.
    meta: Mapped[dict[str, Any]] = mapped_column("metadata", default=dict)
    created_at: Mapped[datetime]
    # 0021: its turn is off the story's line (services/store/story_line.py): kept, but no log read shows it.
    hidden: Mapped[bool] = mapped_column(default=False, server_default=false())


class TurnLeaseRow(Base):
    """At most one row per session: the lease some scheduler holds (or held until it lapsed)."""

    __tablename__ = "turn_leases"

    session_id: Mapped[str] = mapped_column(ID, ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True)
    lease_id: Mapped[str] = mapped_column(ID, unique=True)
    turn_id: Mapped[str] = mapped_column(ID)
    holder: Mapped[str] = mapped_column(String(200), default="")
    idempotency_key: Mapped[str | None] = mapped_column(String(128))
    logical_turn: Mapped[int] = mapped_column(BigInteger)
    # Why its turn runs ("player", "continuation", "background", ...): an interjection reaches a player's turn only.
    origin: Mapped[str] = mapped_column(String(32), default="player", server_default="player")
    acquired_at: Mapped[datetime]
    deadline: Mapped[datetime]


class PluginDataRow(Base):
    __tablename__ = "plugin_data"
    __table_args__ = (
        UniqueConstraint("session_id", "plugin_id", "namespace", "key", name="uq_plugin_data_entry"),
        Index("ix_plugin_data_session_plugin", "session_id", "plugin_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    session_id: Mapped[str] = mapped_column(ID, ForeignKey("sessions.id", ondelete="CASCADE"))
    plugin_id: Mapped[str] = mapped_column(String(200))
    namespace: Mapped[str] = mapped_column(String(200))
    key: Mapped[str] = mapped_column(String(500))
    value: Mapped[Any] = mapped_column(Json, nullable=True)
    # The turn whose commit last wrote this entry.
    turn_id: Mapped[str | None] = mapped_column(ID)
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


# --- 0002: world model, exports, events, commit trace, detached jobs ---


class CharacterSchemaRow(Base):
    """A session's character schema; `version` is bumped by the store on every set."""

    __tablename__ = "character_schemas"

    session_id: Mapped[str] = mapped_column(ID, ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True)
    version: Mapped[int] = mapped_column(BigInteger)
    types: Mapped[list[Any]] = mapped_column(default=list)
    attributes: Mapped[dict[str, Any]] = mapped_column(default=dict)
    plugin_id: Mapped[str] = mapped_column(String(200))
    turn_id: Mapped[str | None] = mapped_column(ID)
    updated_at: Mapped[datetime]


class CharacterRow(Base):
    __tablename__ = "characters"

    session_id: Mapped[str] = mapped_column(ID, ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True)
    character_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    # 1 on create, +1 on every upsert (the expectedVersion a writer must name).
    version: Mapped[int] = mapped_column(BigInteger)
    data: Mapped[dict[str, Any]] = mapped_column(default=dict)
    plugin_id: Mapped[str] = mapped_column(String(200))
    turn_id: Mapped[str | None] = mapped_column(ID)
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class LorebookRow(Base):
    """One lorebook entry of a session (migration 0010; services/store/lorebook.py)."""

    __tablename__ = "lorebook_entries"

    session_id: Mapped[str] = mapped_column(ID, ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True)
    # "world", "plugin:<pluginId>" or "player".
    owner: Mapped[str] = mapped_column(String(220), primary_key=True)
    entry_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    title: Mapped[str] = mapped_column(Text, default="")
    keys: Mapped[list[Any]] = mapped_column(default=list)
    content: Mapped[str] = mapped_column(Text, default="")
    constant: Mapped[bool] = mapped_column(default=False)
    disabled: Mapped[bool] = mapped_column(default=False)
    # Its activation rules, camelCase as world.yaml writes them (shared/lorebook_rules.py); None: the defaults (migration 0021).
    activation: Mapped[dict[str, Any] | None] = mapped_column(default=None)
    version: Mapped[int] = mapped_column(BigInteger)
    turn_id: Mapped[str | None] = mapped_column(ID)
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class DimensionSettlementRow(Base):
    """A dimension maintainer's settlement receipt (migration 0011; services/store/settlements.py): kept
    open ("pending") when a turn's maintainer did not commit a dimension.update with it."""

    __tablename__ = "dimension_settlements"
    __table_args__ = (Index("ix_dimension_settlements_session_status", "session_id", "status"),)

    session_id: Mapped[str] = mapped_column(ID, ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True)
    source_turn_id: Mapped[str] = mapped_column(ID, primary_key=True)
    runtime_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    source_logical_turn: Mapped[int] = mapped_column(BigInteger)
    plugin_id: Mapped[str] = mapped_column(String(200))
    # "pending", "settled" (a retry settled it), "handled" or "skipped" (closed by hand).
    status: Mapped[str] = mapped_column(String(16))
    last_error: Mapped[str] = mapped_column(Text, default="")
    # Retries after the source turn.
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    # The maintainer's input snapshot ({"inputs": {...}}), for a retry.
    input: Mapped[dict[str, Any]] = mapped_column(default=dict)
    # The retry turn that settled it.
    resolved_turn_id: Mapped[str | None] = mapped_column(ID)
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class InteractionRow(Base):
    """An interaction a runtime asked (store.proto Interaction; migration 0012; services/store/interactions.py):
    recorded open when the asking turn commits, answered by the committed turn that carries the answer."""

    __tablename__ = "interactions"
    __table_args__ = (Index("ix_interactions_session_status", "session_id", "status"),)

    session_id: Mapped[str] = mapped_column(ID, ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True)
    # Assigned by the scheduler; unique in the session.
    interaction_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    # The turn whose commit asked it, its record_seq and the interaction's place among those it asked (the order listed in).
    turn_id: Mapped[str] = mapped_column(ID)
    turn_seq: Mapped[int] = mapped_column(BigInteger)
    position: Mapped[int] = mapped_column(Integer)
    plugin_id: Mapped[str] = mapped_column(String(200))
    runtime_id: Mapped[str] = mapped_column(String(200))
    # "form", "choice" or "confirm".
    kind: Mapped[str] = mapped_column(String(32))
    # The whole Interaction (protobuf JSON mapping, proto field names).
    interaction: Mapped[dict[str, Any]] = mapped_column(default=dict)
    # "open" or "answered".
    status: Mapped[str] = mapped_column(String(16))
    # The answer's values, and the turn that carried it.
    answer: Mapped[Any] = mapped_column(Json, nullable=True)
    answered_turn_id: Mapped[str | None] = mapped_column(ID)
    created_at: Mapped[datetime]
    answered_at: Mapped[datetime | None]


class DimensionRow(Base):
    __tablename__ = "dimensions"

    session_id: Mapped[str] = mapped_column(ID, ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True)
    dimension_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    # The trusted plugin that initialized it; only it may update it.
    owner_plugin_id: Mapped[str] = mapped_column(String(200))
    name: Mapped[str] = mapped_column(Text, default="")
    description: Mapped[str] = mapped_column(Text, default="")
    schema: Mapped[dict[str, Any]] = mapped_column(default=dict)
    value: Mapped[Any] = mapped_column(Json, nullable=True)
    version: Mapped[int] = mapped_column(BigInteger)
    turn_id: Mapped[str | None] = mapped_column(ID)
    updated_at: Mapped[datetime]


class ExportRow(Base):
    """The latest value a runtime published under `io.output.recordAs` (read by scope: committed)."""

    __tablename__ = "exports"
    __table_args__ = (UniqueConstraint("session_id", "plugin_id", "record_as", name="uq_exports_record"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    session_id: Mapped[str] = mapped_column(ID, ForeignKey("sessions.id", ondelete="CASCADE"))
    plugin_id: Mapped[str] = mapped_column(String(200))
    record_as: Mapped[str] = mapped_column(String(200))
    runtime_id: Mapped[str] = mapped_column(String(200))
    value: Mapped[Any] = mapped_column(Json, nullable=True)
    turn_id: Mapped[str] = mapped_column(ID)
    logical_turn: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[datetime]


class TurnEventRow(Base):
    """An event a runtime emitted (proposal event.emit), in commit order within the turn."""

    __tablename__ = "turn_events"
    __table_args__ = (UniqueConstraint("turn_id", "seq", name="uq_turn_events_turn_seq"),)

    id: Mapped[str] = mapped_column(ID, primary_key=True)
    session_id: Mapped[str] = mapped_column(ID, ForeignKey("sessions.id", ondelete="CASCADE"), index=True)
    turn_id: Mapped[str] = mapped_column(ID, ForeignKey("turns.id", ondelete="CASCADE"))
    seq: Mapped[int] = mapped_column(Integer)
    plugin_id: Mapped[str] = mapped_column(String(200))
    runtime_id: Mapped[str] = mapped_column(String(200))
    name: Mapped[str] = mapped_column(String(200))
    payload: Mapped[Any] = mapped_column(Json, nullable=True)
    created_at: Mapped[datetime]


class TurnTraceRow(Base):
    """The turn's trace (runtime and commit entries such as read-dependency.kept), kept with it."""

    __tablename__ = "turn_traces"

    turn_id: Mapped[str] = mapped_column(ID, ForeignKey("turns.id", ondelete="CASCADE"), primary_key=True)
    session_id: Mapped[str] = mapped_column(ID, ForeignKey("sessions.id", ondelete="CASCADE"), index=True)
    entries: Mapped[list[Any]] = mapped_column(default=list)
    discarded_units: Mapped[list[Any]] = mapped_column(default=list)


ACTIVE_JOB_STATUSES = ("queued", "running")


class DetachedJobRow(Base):
    __tablename__ = "detached_jobs"
    __table_args__ = (
        # At most one running job per (session, plugin, runtime); queued ones wait their turn (0004).
        Index(
            "uq_detached_jobs_running",
            "session_id",
            "plugin_id",
            "runtime_id",
            unique=True,
            sqlite_where=text("status = 'running'"),
            postgresql_where=text("status = 'running'"),
        ),
        Index("ix_detached_jobs_status_enqueued", "status", "enqueued_at"),
        # 0015: a session's queued and running jobs, counted when a turn starts (back-pressure).
        Index("ix_detached_jobs_session_status", "session_id", "status"),
    )

    id: Mapped[str] = mapped_column(ID, primary_key=True)
    session_id: Mapped[str] = mapped_column(ID, ForeignKey("sessions.id", ondelete="CASCADE"))
    turn_id: Mapped[str] = mapped_column(ID)
    plugin_id: Mapped[str] = mapped_column(String(200))
    runtime_id: Mapped[str] = mapped_column(String(200))
    # queued, running, succeeded, failed, timed-out, orphaned, superseded, cancelled (its session ended).
    status: Mapped[str] = mapped_column(String(16))
    input: Mapped[Any] = mapped_column(Json, nullable=True)
    settle: Mapped[bool] = mapped_column(default=False)
    max_queue_ms: Mapped[int] = mapped_column(BigInteger)
    max_execution_ms: Mapped[int] = mapped_column(BigInteger)
    enqueued_at: Mapped[datetime]
    lease_id: Mapped[str | None] = mapped_column(ID)
    holder: Mapped[str] = mapped_column(String(200), default="")
    claimed_at: Mapped[datetime | None]
    lease_deadline: Mapped[datetime | None]
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    result: Mapped[Any] = mapped_column(Json, nullable=True)
    error: Mapped[str] = mapped_column(Text, default="")
    finished_at: Mapped[datetime | None]
    # 0015: queued again after a passing failure, it is not claimed before this.
    not_before: Mapped[datetime | None]


# --- 0005: signals to a running turn, across scheduler replicas ---


class TurnSignalRow(Base):
    """A cancel or interjection left for the session's running turn; its lease holder takes it once."""

    __tablename__ = "turn_signals"
    __table_args__ = (Index("ix_turn_signals_session_turn", "session_id", "turn_id"),)

    # Autoincrement: the order the store received them in.
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    session_id: Mapped[str] = mapped_column(ID, ForeignKey("sessions.id", ondelete="CASCADE"))
    turn_id: Mapped[str] = mapped_column(ID)
    # "cancel" or "interject".
    kind: Mapped[str] = mapped_column(String(16))
    # cancel: {"reason"}; interject: {"text"}.
    payload: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime]
    taken_at: Mapped[datetime | None]


class HookStateRow(Base):
    """0017: one key of a plugin's hook state in a session (ctx.state, shared by every hooks replica; hook_state.py)."""

    __tablename__ = "hook_state"

    session_id: Mapped[str] = mapped_column(ID, ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True)
    plugin_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    value: Mapped[Any] = mapped_column(Json, nullable=True)
    updated_at: Mapped[datetime]


class MemoryVectorRow(Base):
    """0018, memory-search's vector index: a searchable record's embedding by one model (memory_vectors.py)."""

    __tablename__ = "memory_vectors"

    session_id: Mapped[str] = mapped_column(ID, ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True)
    model: Mapped[str] = mapped_column(String(200), primary_key=True)
    source: Mapped[str] = mapped_column(String(500), primary_key=True)
    key: Mapped[str] = mapped_column(String(500), primary_key=True)
    content_hash: Mapped[str] = mapped_column(String(128))
    dimensions: Mapped[int] = mapped_column(Integer)
    # float32 little-endian: sqlite-vec's own format, and 4 bytes a number wherever it is ranked.
    vector: Mapped[bytes] = mapped_column(LargeBinary)
    updated_at: Mapped[datetime]


class TurnCheckpointRow(Base):
    """0021, the story's moves (story_line.py): the session's state as a committed turn left it (checkpoints.py): what
    a rewind, a chosen version or a branch restores. Keyed by the turn's id, or by the session's for its first state."""

    __tablename__ = "turn_checkpoints"

    turn_id: Mapped[str] = mapped_column(ID, primary_key=True)
    session_id: Mapped[str] = mapped_column(ID, ForeignKey("sessions.id", ondelete="CASCADE"), index=True)
    state: Mapped[dict[str, Any]] = mapped_column(default=dict)


class StoryMoveRow(Base):
    """A story move done (rewind, version chosen, branch) by request id: a resent request answers with it."""

    __tablename__ = "story_moves"

    session_id: Mapped[str] = mapped_column(ID, ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True)
    request_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    # "head" (rewind, a version chosen) or "branch" (result_session_id: the session it created).
    kind: Mapped[str] = mapped_column(String(16))
    turn_id: Mapped[str] = mapped_column(ID)
    result_session_id: Mapped[str] = mapped_column(ID, default="")
    created_at: Mapped[datetime]

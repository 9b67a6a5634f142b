"""What a turn reads before it runs (store.proto TurnReads), answered with its lease: the world
model, a window of the conversation log and the committed plugin data its runtimes read. Core statements built once, rows mapped straight to
protos: a turn pays for what its prompts read, not for the whole log."""

from __future__ import annotations

from typing import Any, cast

from sqlalchemy import Table, and_, bindparam, false, select
from sqlalchemy.orm import Session

from covel.common.v1 import common_pb2
from covel.store.v1 import store_pb2
from services.store.interactions import open_interactions
from services.store.lorebook import entry_to_proto
from services.store.models import (
    CharacterRow,
    CharacterSchemaRow,
    DimensionRow,
    LorebookRow,
    MessageRow,
    PluginDataRow,
    SessionRow,
)
from services.store.proto_mapping import message_to_proto, plugin_data_to_proto
from services.store.revisions import entries_revision, world_revision
from services.store.settlements import pending_settlements
from shared.lorebook_rules import settings_to_proto
from shared.structs import to_struct, to_value


def read_for_turn(db: Session, session_id: str, reads: store_pb2.TurnReads) -> store_pb2.AcquireTurnLeaseResponse:
    """The reads of `reads` as the fields of a lease reply (world, history); the session exists."""
    reply = store_pb2.AcquireTurnLeaseResponse()
    if reads.world:
        reply.world.CopyFrom(world_model(db, session_id))
    if reads.HasField("history"):
        window = reads.history
        reply.history.extend(history_window(db, session_id, window.player_turns, with_metadata=not window.without_metadata))
    reply.plugin_data.extend(plugin_data_reads(db, session_id, list(reads.plugin_data)))
    return reply


def plugin_data_reads(db: Session, session_id: str, scopes: list[store_pb2.PluginDataScope]) -> list[store_pb2.PluginDataRead]:
    """Each scope's committed data (one plugin's, one namespace of it or all of it), as ListPluginData orders it.
    Two statements for all the scopes (the whole plugins', the namespaces'), not one per scope: a demo turn reads
    a dozen scopes, and each statement costs more to run through SQLAlchemy than its rows."""
    connection = db.connection()
    rows: dict[tuple[str, str], list[Any]] = {}
    whole = sorted({scope.plugin_id for scope in scopes if not scope.namespace})
    if whole:
        for row in connection.execute(_ALL_OF_PLUGINS, {"b_session": session_id, "b_plugins": whole}):
            rows.setdefault((row.plugin_id, ""), []).append(row)
    wanted = {(scope.plugin_id, scope.namespace) for scope in scopes if scope.namespace}
    if wanted:
        parameters = {"b_session": session_id, "b_plugins": sorted({plugin for plugin, _ in wanted}),
                      "b_namespaces": sorted({namespace for _, namespace in wanted})}
        for row in connection.execute(_NAMESPACES_OF_PLUGINS, parameters):
            if (row.plugin_id, row.namespace) in wanted:  # the two INs also match another plugin's namespace name
                rows.setdefault((row.plugin_id, row.namespace), []).append(row)
    reads = []
    for scope in scopes:
        read = store_pb2.PluginDataRead()
        read.scope.CopyFrom(scope)
        read.entries.extend(plugin_data_to_proto(row) for row in rows.get((scope.plugin_id, scope.namespace), ()))
        read.revision = entries_revision(read.entries)  # what a detached job's commit checks (read_checks.py)
        reads.append(read)
    return reads


def world_model(db: Session, session_id: str) -> store_pb2.GetWorldResponse:
    """The session's character schema, characters (by id), dimensions (by id), lorebook, open
    dimension settlement receipts (oldest source turn first) and open interactions (oldest first)."""
    connection = db.connection()
    schema = connection.execute(_SCHEMA, {"b_session": session_id}).one_or_none()
    world = store_pb2.GetWorldResponse()
    if schema is not None:
        world.character_schema_version = schema.version
        world.character_schema.CopyFrom(to_struct({"types": schema.types, "attributes": schema.attributes}))
    world.characters.extend(
        store_pb2.Character(id=row.character_id, version=row.version, data=to_struct(row.data), plugin_id=row.plugin_id,
                            turn_id=row.turn_id or "")
        for row in connection.execute(_CHARACTERS, {"b_session": session_id}))
    world.dimensions.extend(
        store_pb2.Dimension(id=row.dimension_id, owner_plugin_id=row.owner_plugin_id, name=row.name, description=row.description,
                            schema=to_struct(row.schema), value=to_value(row.value), version=row.version, turn_id=row.turn_id or "")
        for row in connection.execute(_DIMENSIONS, {"b_session": session_id}))
    world.lorebook.extend(entry_to_proto(row) for row in connection.execute(_LOREBOOK, {"b_session": session_id}))
    settings = settings_to_proto(connection.execute(_LOREBOOK_SETTINGS, {"b_session": session_id}).scalar_one_or_none())
    if settings is not None:
        world.lorebook_settings.CopyFrom(settings)
    world.pending_settlements.extend(pending_settlements(connection, session_id))
    world.open_interactions.extend(open_interactions(connection, session_id))
    world.revision = world_revision(world.character_schema_version, ((c.id, c.version) for c in world.characters),
                                    ((d.id, d.version) for d in world.dimensions))
    return world


def history_window(db: Session, session_id: str, player_turns: int, *, with_metadata: bool = True) -> list[common_pb2.Message]:
    """store.proto HistoryWindow: the latest summary, then the log after what it folded (throughSeq),
    from the `player_turns`-th last player message on (0: all of it); summaries always with their metadata."""
    connection = db.connection()
    summary = connection.execute(_LATEST_SUMMARY, {"b_session": session_id}).one_or_none()
    through = _through_seq(summary.meta) if summary is not None else 0
    start = through + 1
    if player_turns > 0:
        nth_last = connection.execute(_NTH_LAST_PLAYER, {"b_session": session_id, "b_after": through, "b_skip": player_turns - 1})
        start = max(start, nth_last.scalar_one_or_none() or start)
    rows = list(connection.execute(_LOG_FROM, {"b_session": session_id, "b_from": start}))
    if summary is not None and all(row.id != summary.id for row in rows):
        rows.insert(0, summary)
    return [message_to_proto(row, with_metadata or row.role == "summary") for row in rows]


def _through_seq(meta: Any) -> int:
    value = meta.get("throughSeq") if isinstance(meta, dict) else None
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


# A declarative class with __tablename__ always maps a Table; DeclarativeBase types __table__ as any FromClause.
_MESSAGES = cast(Table, MessageRow.__table__)
_SCHEMAS = cast(Table, CharacterSchemaRow.__table__)
_CHARACTER_ROWS = cast(Table, CharacterRow.__table__)
_DIMENSION_ROWS = cast(Table, DimensionRow.__table__)
# Built once: building a statement costs more than running it. `metadata` is labelled `meta`, as the ORM names it.
_MESSAGE_COLUMNS = [column.label("meta") if column.name == "metadata" else column for column in _MESSAGES.columns]
# Messages of turns off the story's line are hidden (story_line.py): no turn reads them.
_IN_SESSION = and_(_MESSAGES.c.session_id == bindparam("b_session"), _MESSAGES.c.hidden == false())
_LATEST_SUMMARY = (select(*_MESSAGE_COLUMNS).where(_IN_SESSION, _MESSAGES.c.role == "summary")
                   .order_by(_MESSAGES.c.seq.desc()).limit(1))
_NTH_LAST_PLAYER = (select(_MESSAGES.c.seq).where(_IN_SESSION, _MESSAGES.c.role == "player", _MESSAGES.c.seq > bindparam("b_after"))
                    .order_by(_MESSAGES.c.seq.desc()).limit(1).offset(bindparam("b_skip")))
_LOG_FROM = select(*_MESSAGE_COLUMNS).where(_IN_SESSION, _MESSAGES.c.seq >= bindparam("b_from")).order_by(_MESSAGES.c.seq)
_LOREBOOK_ROWS = cast(Table, LorebookRow.__table__)
_LOREBOOK = (select(_LOREBOOK_ROWS).where(_LOREBOOK_ROWS.c.session_id == bindparam("b_session"))
             .order_by(_LOREBOOK_ROWS.c.owner, _LOREBOOK_ROWS.c.entry_id))
_LOREBOOK_SETTINGS = select(SessionRow.lorebook_settings).where(SessionRow.id == bindparam("b_session"))
_PLUGIN_DATA = cast(Table, PluginDataRow.__table__)
_IN_PLUGINS = (_PLUGIN_DATA.c.session_id == bindparam("b_session"), _PLUGIN_DATA.c.plugin_id.in_(bindparam("b_plugins", expanding=True)))
_ALL_OF_PLUGINS = (select(_PLUGIN_DATA).where(*_IN_PLUGINS)
                   .order_by(_PLUGIN_DATA.c.plugin_id, _PLUGIN_DATA.c.namespace, _PLUGIN_DATA.c.key))
_NAMESPACES_OF_PLUGINS = (select(_PLUGIN_DATA).where(*_IN_PLUGINS, _PLUGIN_DATA.c.namespace.in_(bindparam("b_namespaces", expanding=True)))
                          .order_by(_PLUGIN_DATA.c.plugin_id, _PLUGIN_DATA.c.namespace, _PLUGIN_DATA.c.key))
_SCHEMA = select(_SCHEMAS).where(_SCHEMAS.c.session_id == bindparam("b_session"))
_CHARACTERS = (select(_CHARACTER_ROWS).where(_CHARACTER_ROWS.c.session_id == bindparam("b_session"))
               .order_by(_CHARACTER_ROWS.c.character_id))
_DIMENSIONS = (select(_DIMENSION_ROWS).where(_DIMENSION_ROWS.c.session_id == bindparam("b_session"))
               .order_by(_DIMENSION_ROWS.c.dimension_id))

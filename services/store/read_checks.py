"""A commit's read checks (CommitTurnRequest.read_checks): a detached job runs without the session's lease on what
it read, then takes the lease for its commit, and the store compares, inside the commit's transaction (the session
locked), the revisions of what it read with the state now. A change answers ABORTED (reason READ_CONFLICT) and
nothing is written: the job runs again on the new state (services/scheduler/detached/worker.py)."""

from __future__ import annotations

from typing import cast

import grpc
from sqlalchemy import Table, bindparam, select
from sqlalchemy.orm import Session

from covel.store.v1 import store_pb2
from services.store.models import CharacterRow, CharacterSchemaRow, DimensionRow, PluginDataRow
from services.store.revisions import rows_revision, world_revision
from shared.errors import ServiceError

READ_CONFLICT = "READ_CONFLICT"  # shared/error_reasons.py


def check(db: Session, session_id: str, checks: store_pb2.ReadChecks) -> None:
    """ABORTED (READ_CONFLICT) when what the checks name changed since it was read."""
    changed = [f"plugin data {read.scope.plugin_id}/{read.scope.namespace or '*'}" for read in checks.plugin_data
               if _scope_revision(db, session_id, read.scope) != read.revision]
    if checks.world_revision and _world_revision(db, session_id) != checks.world_revision:
        changed.insert(0, "the world's characters or dimensions")
    if changed:
        raise ServiceError(grpc.StatusCode.ABORTED, f"session {session_id}: what the turn read changed since it read it "
                           f"({', '.join(changed)}); nothing was written", reason=READ_CONFLICT)


def _scope_revision(db: Session, session_id: str, scope: store_pb2.PluginDataScope) -> str:
    """turn_reads.plugin_data_read's revision, from the entries' addresses and writes alone (not their values)."""
    parameters = {"b_session": session_id, "b_plugin": scope.plugin_id, "b_namespace": scope.namespace}
    return rows_revision(db.connection().execute(_NAMESPACE if scope.namespace else _ALL_OF_PLUGIN, parameters))


def _world_revision(db: Session, session_id: str) -> str:
    connection = db.connection()
    parameters = {"b_session": session_id}
    schema = connection.execute(_SCHEMA_VERSION, parameters).scalar_one_or_none() or 0
    return world_revision(schema, connection.execute(_CHARACTERS, parameters), connection.execute(_DIMENSIONS, parameters))


_PLUGIN_DATA = cast(Table, PluginDataRow.__table__)
_CHARACTER_ROWS = cast(Table, CharacterRow.__table__)
_DIMENSION_ROWS = cast(Table, DimensionRow.__table__)
_SCHEMAS = cast(Table, CharacterSchemaRow.__table__)
# Built once, ordered as turn_reads reads them.
_WRITES = (_PLUGIN_DATA.c.namespace, _PLUGIN_DATA.c.key, _PLUGIN_DATA.c.turn_id, _PLUGIN_DATA.c.updated_at)
_OF_PLUGIN = (_PLUGIN_DATA.c.session_id == bindparam("b_session"), _PLUGIN_DATA.c.plugin_id == bindparam("b_plugin"))
_ALL_OF_PLUGIN = select(*_WRITES).where(*_OF_PLUGIN).order_by(_PLUGIN_DATA.c.namespace, _PLUGIN_DATA.c.key)
_NAMESPACE = select(*_WRITES).where(*_OF_PLUGIN, _PLUGIN_DATA.c.namespace == bindparam("b_namespace")).order_by(_PLUGIN_DATA.c.key)
_SCHEMA_VERSION = select(_SCHEMAS.c.version).where(_SCHEMAS.c.session_id == bindparam("b_session"))
_CHARACTERS = (select(_CHARACTER_ROWS.c.character_id, _CHARACTER_ROWS.c.version).where(_CHARACTER_ROWS.c.session_id == bindparam("b_session"))
               .order_by(_CHARACTER_ROWS.c.character_id))
_DIMENSIONS = (select(_DIMENSION_ROWS.c.dimension_id, _DIMENSION_ROWS.c.version).where(_DIMENSION_ROWS.c.session_id == bindparam("b_session"))
               .order_by(_DIMENSION_ROWS.c.dimension_id))

"""The operator's plugin-data writes (AdminPutPluginData, AdminDeletePluginData): an override of one record.

What a turn's proposals meet and this does not: the namespace's dataset schema and its allowed operations
(the spec keeps the admin API's PUT / DELETE as an operator's override). What still holds: who may call
(the policy table: operators only), the plugin being active in the session (an ended session changes nothing),
the kernel's `_` namespaces, the lengths of namespace and key, and the value's size limit. A write never races a
turn: while a turn holds the session's lease it is refused (FAILED_PRECONDITION, TURN_RUNNING), so a turn
reads the data as it was when it began and commits on top of what the operator wrote.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from covel.store.v1 import store_pb2
from services.store import plugin_data
from services.store.apply_context import VALUE_MAX_BYTES, Rejected, json_sized
from services.store.database import lock_session
from services.store.models import PluginDataRow, SessionRow, TurnLeaseRow, utcnow
from services.store.proto_mapping import plugin_data_to_proto
from shared.errors import FieldViolation, failed_precondition, invalid_arguments, not_found
from shared.structs import from_value

RECORD = "covel.store.v1.PluginDataEntry"
OPERATOR_MAX = 200
REASON_MAX = 500


def record_name(session_id: str, plugin_id: str, namespace: str, key: str) -> str:
    return f"sessions/{session_id}/plugins/{plugin_id}/data/{namespace}/{key}"


def check_request(request: store_pb2.AdminPutPluginDataRequest | store_pb2.AdminDeletePluginDataRequest) -> None:
    """Every field at once, each violation named (INVALID_ARGUMENT with BadRequest)."""
    problems: list[FieldViolation] = []
    for name, limit in (
        ("session_id", 200),
        ("plugin_id", 200),
        ("namespace", plugin_data.NAMESPACE_MAX),
        ("key", plugin_data.KEY_MAX),
        ("operator", OPERATOR_MAX),
    ):
        value = getattr(request, name)
        if not value.strip():
            problems.append(FieldViolation(name, "required" + (": who writes, for the audit log" if name == "operator" else "")))
        elif len(value) > limit:
            problems.append(FieldViolation(name, f"longer than {limit} characters"))
    if request.namespace.startswith("_"):
        problems.append(FieldViolation("namespace", "names starting with _ are reserved for the kernel; no API writes them"))
    if len(request.reason) > REASON_MAX:
        problems.append(FieldViolation("reason", f"longer than {REASON_MAX} characters"))
    if isinstance(request, store_pb2.AdminPutPluginDataRequest):
        if not request.HasField("value"):
            problems.append(FieldViolation("value", "required (null is a value: give null_value)"))
        else:
            try:
                json_sized("value", from_value(request.value))
            except Rejected:
                problems.append(FieldViolation("value", f"larger than {VALUE_MAX_BYTES} bytes of JSON"))
    if problems:
        raise invalid_arguments(problems)


def _writable_session(db: Session, session_id: str, plugin_id: str) -> SessionRow:
    row = lock_session(db, session_id)
    subject = f"sessions/{session_id}"
    if row.status == "ended":
        raise failed_precondition(
            f"session {session_id} has ended; its plugin data does not change", reason="SESSION_ENDED", subject=subject
        )
    if plugin_id not in row.active_plugins:
        raise not_found(
            f"plugin {plugin_id!r} is not active in session {session_id} (active: {', '.join(row.active_plugins) or 'none'})",
            resource_type="covel.registry.v1.PluginPackage",
            resource_name=plugin_id,
            reason="PLUGIN_NOT_ACTIVE",
        )
    lease = db.get(TurnLeaseRow, session_id)
    if lease is not None and lease.deadline > utcnow():
        raise failed_precondition(
            f"turn {lease.turn_id} of session {session_id} is running; write when it has ended",
            reason="TURN_RUNNING",
            subject=subject,
        )
    return row


def _row(db: Session, session_id: str, plugin_id: str, namespace: str, key: str) -> PluginDataRow | None:
    return db.execute(
        select(PluginDataRow).where(
            PluginDataRow.session_id == session_id,
            PluginDataRow.plugin_id == plugin_id,
            PluginDataRow.namespace == namespace,
            PluginDataRow.key == key,
        )
    ).scalar_one_or_none()


def put(db: Session, request: store_pb2.AdminPutPluginDataRequest) -> store_pb2.PluginDataEntry:
    """Create or replace the record; its turn_id is empty (no turn wrote it)."""
    _writable_session(db, request.session_id, request.plugin_id)
    value: Any = from_value(request.value)
    now = utcnow()
    row = _row(db, request.session_id, request.plugin_id, request.namespace, request.key)
    if row is None:
        row = PluginDataRow(
            session_id=request.session_id,
            plugin_id=request.plugin_id,
            namespace=request.namespace,
            key=request.key,
            value=value,
            turn_id=None,
            created_at=now,
            updated_at=now,
        )
        db.add(row)
    else:
        row.value, row.turn_id, row.updated_at = value, None, now
    db.flush()
    return plugin_data_to_proto(row)


def delete(db: Session, request: store_pb2.AdminDeletePluginDataRequest) -> store_pb2.PluginDataEntry:
    """Remove the record; NOT_FOUND (with its ResourceInfo) when there is none."""
    _writable_session(db, request.session_id, request.plugin_id)
    row = _row(db, request.session_id, request.plugin_id, request.namespace, request.key)
    if row is None:
        name = record_name(request.session_id, request.plugin_id, request.namespace, request.key)
        raise not_found(f"no plugin data at {name}", resource_type=RECORD, resource_name=name, reason="PLUGIN_DATA_NOT_FOUND")
    entry = plugin_data_to_proto(row)
    db.delete(row)
    return entry


def audit_fields(
    request: store_pb2.AdminPutPluginDataRequest | store_pb2.AdminDeletePluginDataRequest, identity: str | None
) -> dict[str, str]:
    """What the audit line names: the operator, the certificate's identity, the record and why."""
    return {
        "operator": request.operator,
        "caller": identity or "(no certificate)",
        "session_id": request.session_id,
        "plugin_id": request.plugin_id,
        "namespace": request.namespace,
        "key": request.key,
        "reason": request.reason,
    }

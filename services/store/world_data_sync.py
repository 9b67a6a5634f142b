"""World data sync (SyncWorldData): a running session's world data brought to the world package as it is now.

The records a world gave a session are managed: the import at CreateSession and each sync keep their addresses
(plugin, namespace, key) in the kernel's own partition of the session's plugin data (plugin `framework`,
namespace `__kernel:world-data`, key `managed`), which no plugin reads or writes. A sync sets each record the world
has now (`added` or `changed`; one equal to the session's is `unchanged` and not written), and deletes each managed
record the world no longer has (`removed`), then keeps the new addresses as managed. A record a plugin wrote itself
is never removed; a managed one a plugin changed since is set back to the world's. The dataset rules apply as to
any write (a set needs `set` and the record must fit the schema; a removal needs `delete`), checked for every
record before anything is written: a refusal changes nothing. A session started before sync was kept has no managed
list: its first sync removes nothing.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select, tuple_
from sqlalchemy.orm import Session

from covel.store.v1 import store_pb2
from services.store.database import lock_session
from services.store.datasets import DatasetViolation, dataset
from services.store.models import PluginDataRow, TurnLeaseRow, utcnow
from services.store.session_world import check_plugin_data
from services.store.world_data_managed import KERNEL_PLUGIN, MANAGED_KEY, MANAGED_NAMESPACE, Address, managed_row
from shared.errors import failed_precondition
from shared.structs import from_struct, from_value


def _rows(db: Session, session_id: str, addresses: set[Address]) -> dict[Address, PluginDataRow]:
    found: dict[Address, PluginDataRow] = {}
    wanted = sorted(addresses)
    for start in range(0, len(wanted), 500):
        statement = select(PluginDataRow).where(
            PluginDataRow.session_id == session_id,
            tuple_(PluginDataRow.plugin_id, PluginDataRow.namespace, PluginDataRow.key).in_(wanted[start : start + 500]),
        )
        found.update({(row.plugin_id, row.namespace, row.key): row for row in db.execute(statement).scalars()})
    return found


def _checked_session(db: Session, request: store_pb2.SyncWorldDataRequest) -> None:
    row = lock_session(db, request.session_id)
    subject = f"sessions/{row.id}"
    if row.status == "ended":
        raise failed_precondition(
            f"session {row.id} has ended; its world data does not change", reason="SESSION_ENDED", subject=subject
        )
    if not row.world_id or row.world_id != request.world_id:
        raise failed_precondition(
            f"session {row.id} was started in world {row.world_id or '(none)'!r}, not {request.world_id!r}",
            reason="WORLD_MISMATCH",
            subject=subject,
        )
    lease = db.get(TurnLeaseRow, row.id)
    if lease is not None and lease.deadline > utcnow():
        raise failed_precondition(
            f"turn {lease.turn_id} of session {row.id} is running; sync when it has ended", reason="TURN_RUNNING", subject=subject
        )


def _check_removals(request: store_pb2.SyncWorldDataRequest, removed: list[Address]) -> None:
    policies = {
        (p.plugin_id, p.namespace): dataset(
            p.plugin_id, p.namespace, from_struct(p.schema) if p.HasField("schema") else None, list(p.ops)
        )
        for p in request.datasets
    }
    for plugin_id, namespace, key in removed:
        policy = policies.get((plugin_id, namespace))
        try:
            if policy is not None:
                policy.check_kinds(["delete"])
        except DatasetViolation as error:
            raise failed_precondition(
                f"the world no longer has {plugin_id} {namespace}/{key}, but removing it is refused: {error}",
                reason="WORLD_SYNC_REFUSED",
                subject=f"sessions/{request.session_id}",
            ) from None


def sync(db: Session, request: store_pb2.SyncWorldDataRequest) -> store_pb2.SyncWorldDataResponse:
    _checked_session(db, request)
    check_plugin_data(store_pb2.SessionWorld(plugin_data=request.records, datasets=request.datasets), "records")
    wanted: dict[Address, Any] = {(e.plugin_id, e.namespace, e.key): from_value(e.value) for e in request.records}
    bookkeeping = _rows(db, request.session_id, {(KERNEL_PLUGIN, MANAGED_NAMESPACE, MANAGED_KEY)})
    kept = next(iter(bookkeeping.values()), None)
    managed = {tuple(item) for item in (kept.value if kept is not None else []) if isinstance(item, list) and len(item) == 3}
    current = _rows(db, request.session_id, set(wanted) | managed)
    changes = [
        store_pb2.WorldDataChange(plugin_id=a[0], namespace=a[1], key=a[2], change="added" if a not in current else "changed")
        for a, value in wanted.items()
        if a not in current or current[a].value != value
    ]
    removed = sorted(a for a in managed if a not in wanted and a in current)
    _check_removals(request, removed)
    changes += [store_pb2.WorldDataChange(plugin_id=a[0], namespace=a[1], key=a[2], change="removed") for a in removed]
    unchanged = len(wanted) - sum(1 for c in changes if c.change != "removed")
    if not request.dry_run:
        _apply(db, request.session_id, wanted, current, removed, kept)
    return store_pb2.SyncWorldDataResponse(changes=changes, unchanged=unchanged, dry_run=request.dry_run)


def _apply(
    db: Session,
    session_id: str,
    wanted: dict[Address, Any],
    current: dict[Address, PluginDataRow],
    removed: list[Address],
    kept: PluginDataRow | None,
) -> None:
    now = utcnow()
    for address, value in wanted.items():
        row = current.get(address)
        if row is None:
            db.add(
                PluginDataRow(
                    session_id=session_id,
                    plugin_id=address[0],
                    namespace=address[1],
                    key=address[2],
                    value=value,
                    turn_id=None,
                    created_at=now,
                    updated_at=now,
                )
            )
        elif row.value != value:
            row.value, row.turn_id, row.updated_at = value, None, now
    for address in removed:
        db.delete(current[address])
    if kept is not None:
        kept.value, kept.updated_at = [list(address) for address in wanted], now
    else:
        db.add(managed_row(session_id, list(wanted), now))
    db.flush()

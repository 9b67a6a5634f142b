"""Hook handlers' session state (ctx.state): a small key-value store per session and plugin.

Hook handlers never propose (their effects are the turn's), yet some must remember across events,
turns and replicas: a token count (cost-gate), the dice a turn rolled (dice-check). The hooks service
keeps nothing of it in memory; every access is one store call, so whichever hooks replica serves an
event sees what another wrote. `add` is atomic under the session lock, so counters from concurrent
replicas add up. The state goes with its session.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from covel.store.v1 import store_pb2
from services.store.database import lock_session
from services.store.models import HookStateRow, utcnow
from shared.errors import failed_precondition, invalid_argument
from shared.structs import from_value, to_value

KEY_MAX = 200
VALUE_MAX_BYTES = 64 * 1024
KEYS_MAX = 256
OPS = ("get", "set", "add", "delete")


def check(request: store_pb2.AccessHookStateRequest) -> None:
    if request.op not in OPS:
        raise invalid_argument("op", f"is {request.op!r}; one of {', '.join(OPS)}")
    if not request.plugin_id:
        raise invalid_argument("plugin_id", "is required: the plugin whose state it is")
    if not request.key or len(request.key) > KEY_MAX:
        raise invalid_argument("key", f"say 1-{KEY_MAX} characters")
    if request.op == "set" and len(json.dumps(from_value(request.value))) > VALUE_MAX_BYTES:
        raise invalid_argument("value", f"is larger than {VALUE_MAX_BYTES} bytes as JSON; keep state small (plugin data holds the rest)")
    if request.op == "add" and not _is_number(from_value(request.value)):
        raise invalid_argument("value", "add takes a number")


def access(db: Session, request: store_pb2.AccessHookStateRequest) -> store_pb2.AccessHookStateResponse:
    key = (request.session_id, request.plugin_id, request.key)
    if request.op == "get":
        row = db.get(HookStateRow, key)
        return _answer(row)
    lock_session(db, request.session_id)
    row = db.get(HookStateRow, key)
    if request.op == "delete":
        db.execute(delete(HookStateRow).where(HookStateRow.session_id == key[0], HookStateRow.plugin_id == key[1], HookStateRow.key == key[2]))
        return store_pb2.AccessHookStateResponse()
    value = from_value(request.value)
    if request.op == "add":
        current = row.value if row is not None else 0
        if not _is_number(current):
            raise failed_precondition(f"key {request.key!r} holds {type(current).__name__}, not a number; add adds to numbers",
                                      reason="HOOK_STATE_NOT_A_NUMBER", subject=f"state/{request.plugin_id}/{request.key}")
        value = current + value
    if row is None:
        if _count(db, request) >= KEYS_MAX:
            raise failed_precondition(f"plugin {request.plugin_id} holds {KEYS_MAX} keys of state in this session; delete some first",
                                      reason="HOOK_STATE_FULL", subject=f"state/{request.plugin_id}")
        row = HookStateRow(session_id=key[0], plugin_id=key[1], key=key[2], value=value, updated_at=utcnow())
        db.add(row)
    else:
        row.value, row.updated_at = value, utcnow()
    db.flush()
    return _answer(row)


def _answer(row: HookStateRow | None) -> store_pb2.AccessHookStateResponse:
    if row is None:
        return store_pb2.AccessHookStateResponse()
    return store_pb2.AccessHookStateResponse(found=True, value=to_value(row.value))


def _count(db: Session, request: store_pb2.AccessHookStateRequest) -> int:
    statement = select(func.count()).select_from(HookStateRow).where(
        HookStateRow.session_id == request.session_id, HookStateRow.plugin_id == request.plugin_id)
    return int(db.execute(statement).scalar_one())


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)

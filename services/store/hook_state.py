"""Hook handlers' session state (ctx.state): a small key-value store per session and plugin.

Hook handlers never propose (their effects are the turn's), yet some must remember across events,
turns and replicas: a token count (cost-gate), the dice a turn rolled (dice-check). The hooks service
keeps nothing of it in memory; every access is one store call, so whichever hooks replica serves an
event sees what another wrote. `add` is atomic under the session lock, so counters from concurrent
replicas add up. The state goes with its session.
"""

from __future__ import annotations

import json
from typing import Any, cast

import grpc
from sqlalchemy import Table, and_, bindparam, func, select
from sqlalchemy.orm import Session

from covel.store.v1 import store_pb2
from services.store.database import lock_session_id
from services.store.models import HookStateRow, utcnow
from shared.errors import ServiceError, failed_precondition, invalid_argument
from shared.structs import from_value, to_value

KEY_MAX = 200
VALUE_MAX_BYTES = 64 * 1024
KEYS_MAX = 256
OPS = ("get", "set", "add", "delete")


# The kernel's own state (a reserved plugin id, services/registry/manifest_fields.py): the lorebook's timers.
FRAMEWORK = "framework"


def check_caller(request: store_pb2.AccessHookStateRequest, caller: str | None) -> None:
    """The hooks service reaches the plugins' state, the scheduler the kernel's own (`framework`), neither the other's."""
    if caller == "scheduler" and request.plugin_id != FRAMEWORK:
        raise ServiceError(grpc.StatusCode.PERMISSION_DENIED, "the scheduler reaches only the kernel's own session state "
                           f"(plugin_id `{FRAMEWORK}`: the lorebook's timers); a plugin's is the hooks service's only")
    if caller == "hooks" and request.plugin_id == FRAMEWORK:
        raise ServiceError(grpc.StatusCode.PERMISSION_DENIED, f"`{FRAMEWORK}` is the kernel's own session state; hook handlers have their plugin's")


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
    """Core statements built once (a read of the key, then at most one write): the ORM's identity map and unit
    of work cost more than the statements, and every handler's ctx.state call is one of these."""
    connection = db.connection()
    key = {"b_session": request.session_id, "b_plugin": request.plugin_id, "b_key": request.key}
    if request.op == "get":
        return _answer(connection.execute(_VALUE, key).one_or_none())
    lock_session_id(db, request.session_id)
    row = connection.execute(_VALUE, key).one_or_none()
    if request.op == "delete":
        connection.execute(_DELETE, key)
        return store_pb2.AccessHookStateResponse()
    value = from_value(request.value)
    if request.op == "add":
        current = row.value if row is not None else 0
        if not _is_number(current):
            raise failed_precondition(f"key {request.key!r} holds {type(current).__name__}, not a number; add adds to numbers",
                                      reason="HOOK_STATE_NOT_A_NUMBER", subject=f"state/{request.plugin_id}/{request.key}")
        value = current + value
    if row is None:
        if connection.execute(_KEYS, key).scalar_one() >= KEYS_MAX:
            raise failed_precondition(f"plugin {request.plugin_id} holds {KEYS_MAX} keys of state in this session; delete some first",
                                      reason="HOOK_STATE_FULL", subject=f"state/{request.plugin_id}")
        connection.execute(_STATE.insert(), {"session_id": request.session_id, "plugin_id": request.plugin_id, "key": request.key,
                                             "value": value, "updated_at": utcnow()})
    else:
        connection.execute(_UPDATE, {**key, "value": value, "updated_at": utcnow()})
    return store_pb2.AccessHookStateResponse(found=True, value=to_value(value))


def _answer(row: Any) -> store_pb2.AccessHookStateResponse:
    if row is None:
        return store_pb2.AccessHookStateResponse()
    return store_pb2.AccessHookStateResponse(found=True, value=to_value(row.value))


# A declarative class with __tablename__ always maps a Table; DeclarativeBase types __table__ as any FromClause.
_STATE = cast(Table, HookStateRow.__table__)
_THIS_PLUGIN = and_(_STATE.c.session_id == bindparam("b_session"), _STATE.c.plugin_id == bindparam("b_plugin"))
_THIS_KEY = and_(_THIS_PLUGIN, _STATE.c.key == bindparam("b_key"))
# Built once: building a statement costs more than running it.
_VALUE = select(_STATE.c.value).where(_THIS_KEY)
_DELETE = _STATE.delete().where(_THIS_KEY)
_UPDATE = _STATE.update().where(_THIS_KEY)
_KEYS = select(func.count()).select_from(_STATE).where(_THIS_PLUGIN)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)

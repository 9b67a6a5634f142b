"""Checks of incoming requests: INVALID_ARGUMENT naming the field, before any database work."""

from __future__ import annotations

import re

from covel.store.v1 import store_pb2
from shared.errors import invalid_argument, require

LOCALE = re.compile(r"^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8})*$")
PHASES = ("setup", "playing")
ORIGINS = ("player", "continuation", "manual", "background")
IDEMPOTENCY_KEY_MAX = 128
PLUGIN_ID_MAX = 200
TITLE_MAX = 500
# Leases: ttl and wait are bounded so a typo cannot lock a session for a day.
LEASE_TTL_MAX_MS = 60 * 60 * 1000
LEASE_WAIT_MAX_MS = 5 * 60 * 1000
FINISHED_STATUSES = (store_pb2.TURN_STATUS_COMMITTED, store_pb2.TURN_STATUS_ABORTED, store_pb2.TURN_STATUS_FAILED)


def session_id(value: str, field: str = "session_id") -> str:
    return require(value, field, "the id CreateSession returned")


def plugin_list(values: list[str], field: str) -> list[str]:
    seen: set[str] = set()
    for index, value in enumerate(values):
        if not value.strip():
            raise invalid_argument(f"{field}[{index}]", "is empty; use a plugin id")
        if len(value) > PLUGIN_ID_MAX:
            raise invalid_argument(f"{field}[{index}]", f"is longer than {PLUGIN_ID_MAX} characters")
        if value in seen:
            raise invalid_argument(f"{field}[{index}]", f"{value!r} is listed twice")
        seen.add(value)
    return list(values)


def new_session(request: store_pb2.CreateSessionRequest) -> store_pb2.Session:
    """The caller's session fields, checked; defaults filled in (locale "en", phase "playing")."""
    session = store_pb2.Session()
    session.CopyFrom(request.session)
    if session.id:
        raise invalid_argument("session.id", "is assigned by the store; leave it empty")
    if session.status not in (store_pb2.SESSION_STATUS_UNSPECIFIED, store_pb2.SESSION_STATUS_ACTIVE):
        raise invalid_argument("session.status", "a new session is ACTIVE; leave it unset")
    if session.completed_player_turns:
        raise invalid_argument("session.completed_player_turns", "a new session has 0 completed turns; leave it unset")
    if session.HasField("created_at") or session.HasField("updated_at"):
        raise invalid_argument("session.created_at", "times are assigned by the store; leave them unset")
    session.locale = session.locale or "en"
    if not LOCALE.match(session.locale):
        raise invalid_argument("session.locale", f"is {session.locale!r}; use a language tag such as en or zh-CN")
    session.phase = session.phase or "playing"
    if session.phase not in PHASES:
        raise invalid_argument("session.phase", f"is {session.phase!r}; use one of {', '.join(PHASES)}")
    if len(session.title) > TITLE_MAX:
        raise invalid_argument("session.title", f"is longer than {TITLE_MAX} characters")
    if len(session.world_id) > PLUGIN_ID_MAX:
        raise invalid_argument("session.world_id", f"is longer than {PLUGIN_ID_MAX} characters")
    for field in ("active_plugins", "requested_plugins", "excluded_plugins", "approved_plugins"):
        plugin_list(list(getattr(session, field)), f"session.{field}")
    for runtime_id, model in session.runtime_model_overrides.items():
        if not runtime_id.strip() or not model.strip():
            raise invalid_argument("session.runtime_model_overrides", "runtime ids and models must be non-empty")
    for plugin_id in session.plugin_settings:
        if not plugin_id.strip():
            raise invalid_argument("session.plugin_settings", "keys are plugin ids and must be non-empty")
    return session


def idempotency_key(value: str, field: str) -> str:
    if len(value) > IDEMPOTENCY_KEY_MAX:
        raise invalid_argument(field, f"is longer than {IDEMPOTENCY_KEY_MAX} characters")
    return value


def ttl_ms(value: int, default_ms: int, field: str = "ttl_ms") -> int:
    if value < 0 or value > LEASE_TTL_MAX_MS:
        raise invalid_argument(field, f"is {value}; use 0 (default {default_ms}) up to {LEASE_TTL_MAX_MS}")
    return value or default_ms


def acquire(request: store_pb2.AcquireTurnLeaseRequest) -> None:
    session_id(request.session_id)
    idempotency_key(request.idempotency_key, "idempotency_key")
    if request.wait_ms < 0 or request.wait_ms > LEASE_WAIT_MAX_MS:
        raise invalid_argument("wait_ms", f"is {request.wait_ms}; use 0 (answer at once) up to {LEASE_WAIT_MAX_MS}")
    if len(request.holder) > PLUGIN_ID_MAX:
        raise invalid_argument("holder", f"is longer than {PLUGIN_ID_MAX} characters")


def commit(request: store_pb2.CommitTurnRequest) -> None:
    session_id(request.session_id)
    require(request.lease_id, "lease_id", "the lease AcquireTurnLease returned")
    if not request.HasField("turn"):
        raise invalid_argument("turn", "is required: the turn as run")
    turn = request.turn
    require(turn.id, "turn.id", "the turn_id of the lease")
    if turn.session_id and turn.session_id != request.session_id:
        raise invalid_argument("turn.session_id", f"is {turn.session_id} but the request is for session {request.session_id}")
    if turn.status not in FINISHED_STATUSES:
        raise invalid_argument("turn.status", "use COMMITTED, ABORTED or FAILED")
    idempotency_key(turn.idempotency_key, "turn.idempotency_key")
    if turn.origin and turn.origin not in ORIGINS:
        raise invalid_argument("turn.origin", f"is {turn.origin!r}; use one of {', '.join(ORIGINS)}")
    seen: set[str] = set()
    for index, proposal in enumerate(request.proposals):
        require(proposal.id, f"proposals[{index}].id", "a unique id per proposal")
        if proposal.id in seen:
            raise invalid_argument(f"proposals[{index}].id", f"{proposal.id!r} is used by another proposal")
        seen.add(proposal.id)
        require(proposal.type, f"proposals[{index}].type", "e.g. narrative.append or plugin.data")
        require(proposal.plugin_id, f"proposals[{index}].plugin_id", "the plugin that proposed the write")


def approvals(request: store_pb2.UpdateSessionApprovalsRequest) -> None:
    session_id(request.session_id)
    plugin_list(list(request.approve), "approve")
    plugin_list(list(request.revoke), "revoke")
    approving = set(request.approve)
    for index, plugin_id in enumerate(request.revoke):
        if plugin_id in approving:
            raise invalid_argument(f"revoke[{index}]", f"{plugin_id!r} is also in approve; name it in one list")

"""A session belongs to the principal that created it (issue 18): a client-API call that names a
session runs only for its owner or an operator, or (a few reads and its own seat's play) for a guest
who took one of its seats with the owner's grant (api/seat_invites.py).

Checked for every Scheduler method before it runs (shared/security/auth.py's `authorize`), from
the request's fields, so a method added later is covered without remembering to. A stranger gets
the answer a session that does not exist gets, word for word: ids cannot be probed.
"""

from __future__ import annotations

from contextvars import ContextVar

import grpc
from google.protobuf.message import Message

from covel.scheduler.v1 import scheduler_pb2
from covel.store.v1 import store_pb2, store_pb2_grpc
from services.scheduler.recently_used import RecentlyUsed
from shared.errors import ServiceError, invalid_argument, session_not_found
from shared.security.auth import caller

SCHEDULER_METHODS = f"/{scheduler_pb2.DESCRIPTOR.services_by_name['Scheduler'].full_name}/"


OWNERS_CACHED = 10_000
# What a guest at a session's table may call: read the story, follow it live and play its own seat.
GUEST_METHODS = frozenset({"GetSession", "ListTurns", "GetTurn", "ListMessages", "WatchTurn", "WatchSession", "SubmitActions",
                           "ListActionKinds", "ListPanels", "GetSessionPlugins"})
# The seat the caller plays as a guest of the session its request names (None: the owner, an operator).
_GUEST_SEAT: ContextVar[str | None] = ContextVar("covel_guest_seat", default=None)


def guest_seat() -> str | None:
    """The seat the current call's principal took as a guest (None when it owns the session or is an operator)."""
    return _GUEST_SEAT.get()


def missing_session(session_id: str) -> ServiceError:
    """What the store answers for an unknown session id (services/store/sessions.py)."""
    return session_not_found(session_id)


def missing_parent(session_id: str) -> ServiceError:
    """What CreateSession answers for an unknown parent_session_id (api/session_creation.py SessionCreation._parent_session)."""
    return invalid_argument("parent_session_id", f"no session {session_id!r}; name an existing session")


def _named_sessions(request: Message) -> list[tuple[str, ServiceError]]:
    """The sessions a request acts on, each with the answer for one the caller may not use."""
    named: list[tuple[str, ServiceError]] = []
    session_id = getattr(request, "session_id", "")
    if session_id:
        named.append((session_id, missing_session(session_id)))
    # Read only with emit_command_hooks (its hooks see the parent); otherwise the field is ignored.
    if isinstance(request, scheduler_pb2.CreateSessionRequest) and request.emit_command_hooks and request.parent_session_id:
        named.append((request.parent_session_id, missing_parent(request.parent_session_id)))
    return named


class SessionAccess:
    """The `authorize` of the scheduler's client API: the caller may use every session the request names."""

    def __init__(self, store: store_pb2_grpc.TransactionalStoreStub, cached: int = OWNERS_CACHED) -> None:
        self._store = store
        # session id -> owner, of sessions their owner used lately: an owner never changes.
        self._owners: RecentlyUsed[str, str] = RecentlyUsed(cached)

    async def check(self, method: str, request: Message) -> None:
        if not method.startswith(SCHEDULER_METHODS):
            return
        principal = caller()
        if principal.is_operator:
            return  # every session; an unknown id gets the method's own NOT_FOUND
        for session_id, refusal in _named_sessions(request):
            if self._owners.get(session_id) == principal.name:
                continue
            # Anyone else is asked of the store every time, by the caller's name: another's session and a missing one
            # are the same query and the same NOT_FOUND there, so a refusal costs the same for a session that exists.
            session = await self._member_session(session_id, principal.name, refusal)
            if session.owner == principal.name:
                self._owners.put(session_id, principal.name)
                continue
            # A guest: asked again on every call (its owner may revoke the seat at any time).
            name = method.removeprefix(SCHEDULER_METHODS)
            if name not in GUEST_METHODS:
                raise ServiceError(grpc.StatusCode.PERMISSION_DENIED, f"{name}: you play a seat of session {session_id} as the owner's "
                                   f"guest; only its owner may do this (a guest may {', '.join(sorted(GUEST_METHODS))})",
                                   reason="SEAT_GUEST_NOT_ALLOWED", metadata={"method": name})
            _GUEST_SEAT.set(next(seat.id for seat in session.seats if seat.occupant == principal.name))

    async def _member_session(self, session_id: str, name: str, refusal: ServiceError) -> store_pb2.Session:
        """The session if `name` owns it or took one of its seats; else the refusal a missing session gets."""
        if not name:  # an empty owner asks the store for any session: a principal always has a name, never that
            raise refusal
        try:
            # The channel gives the call its deadline (shared/grpc_client.py DEADLINES).
            return (await self._store.GetSession(store_pb2.GetSessionRequest(session_id=session_id, owner=name, or_guest=True))).session
        except grpc.aio.AioRpcError as error:
            if error.code() == grpc.StatusCode.NOT_FOUND:
                raise refusal from None
            raise

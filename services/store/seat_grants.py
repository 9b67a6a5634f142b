"""Another player at the table: a seat's one-time grant and its guest (docs/api.md, "Seats").

The owner's scheduler call InviteToSeat keeps here only the SHA-256 of the grant's secret, with its expiry, on the
seat (`grantDigest`, `grantExpiresAt` in the session's seats JSON). RedeemSeatGrant gives the seat to the principal
that shows the secret, once: the grant is spent, the seat names its `occupant`, and `SessionRow.seat_guests` lists
the guest so GetSession(or_guest) finds the session in the same one query as an owner's. RevokeSeat ends both the
open grant and the guest's place. Each is one transaction on the session's locked row.
"""

from __future__ import annotations

import hmac
from datetime import UTC, datetime
from typing import Any

import grpc
from sqlalchemy.orm import Session

from covel.store.v1 import store_pb2
from services.store.database import lock_session
from services.store.models import SessionRow
from services.store.proto_mapping import session_to_proto
from services.store.seats import guest_mark, seat_of
from shared.errors import ServiceError, failed_precondition, invalid_argument

OWNER_SEAT = "main"


def _save(row: SessionRow, seats: list[dict[str, Any]]) -> None:
    row.seats = seats
    guests = [seat["occupant"] for seat in seats if seat.get("occupant")]
    row.seat_guests = guest_mark(",".join(guests)) if guests else ""


def grant_seat(db: Session, request: store_pb2.GrantSeatRequest) -> store_pb2.Session:
    """A new grant for the seat (an earlier open one is replaced); the seat may already have a guest: the grant's
    redeemer takes its place."""
    if request.seat_id == OWNER_SEAT:
        raise invalid_argument("seat_id", "seat main is the owner's own; invite to another of the session's seats")
    row = lock_session(db, request.session_id)
    seats, seat = seat_of(row, request.seat_id)
    seat.update(grantDigest=request.secret_digest, grantExpiresAt=request.expires_at.ToJsonString())
    _save(row, seats)
    db.flush()
    return session_to_proto(row)


def redeem_seat_grant(db: Session, request: store_pb2.RedeemSeatGrantRequest) -> store_pb2.RedeemSeatGrantResponse:
    """The seat whose open grant has this digest, given to `principal`; the grant is spent."""
    row = lock_session(db, request.session_id)
    if row.owner and row.owner == request.principal:
        raise failed_precondition("you own this session: its main seat is yours; hand the invitation to another player",
                                  reason="SEAT_GRANT_OWN_SESSION", subject=f"sessions/{row.id}")
    seats = [dict(seat) for seat in row.seats or []]
    seat = next((seat for seat in seats if seat.get("grantDigest") and hmac.compare_digest(seat["grantDigest"], request.secret_digest)), None)
    if seat is None or row.status != "active":
        raise ServiceError(grpc.StatusCode.PERMISSION_DENIED, "the invitation is not valid: it was used, revoked, or replaced by a newer "
                           "one; ask the session's owner for a new one", reason="SEAT_GRANT_INVALID")
    if datetime.fromisoformat(seat["grantExpiresAt"].replace("Z", "+00:00")) <= datetime.now(UTC):
        raise ServiceError(grpc.StatusCode.PERMISSION_DENIED, "the invitation has expired; ask the session's owner for a new one",
                           reason="SEAT_GRANT_EXPIRED")
    for other in seats:  # one seat per guest: taking this one leaves any other
        if other.get("occupant") == request.principal:
            other.pop("occupant")
    seat.pop("grantDigest"), seat.pop("grantExpiresAt")
    seat["occupant"] = request.principal
    _save(row, seats)
    db.flush()
    return store_pb2.RedeemSeatGrantResponse(session=session_to_proto(row), seat_id=seat["id"])


def revoke_seat(db: Session, request: store_pb2.RevokeSeatRequest) -> store_pb2.Session:
    """The seat's open grant and its guest, gone (idempotent: a seat with neither is left as it is)."""
    row = lock_session(db, request.session_id)
    seats, seat = seat_of(row, request.seat_id)
    for key in ("grantDigest", "grantExpiresAt", "occupant"):
        seat.pop(key, None)
    _save(row, seats)
    db.flush()
    return session_to_proto(row)

"""A session's seats (Session.seats): who plays, in which role, as which character.

A seat's role decides the action kinds it may submit (the scheduler checks that); its current
character is one of its characters. The store keeps them as a JSON list on the session row and
checks (shared/seats.py) that a seat's characters are characters of the session's world model.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from covel.store.v1 import store_pb2
from services.store.models import CharacterRow, SessionRow
from shared.errors import failed_precondition, invalid_argument, session_not_found


def guest_mark(principal: str) -> str:
    """How `SessionRow.seat_guests` names one guest (",alice,bob," holds alice and bob)."""
    return f",{principal},"


def seats_to_rows(seats: list[store_pb2.Seat]) -> list[dict[str, Any]]:
    return [{"id": s.id, "role": s.role, "characterId": s.character_id, "characterIds": list(s.character_ids)} for s in seats]


def seats_to_proto(rows: list[dict[str, Any]] | None) -> list[store_pb2.Seat]:
    return [store_pb2.Seat(id=row["id"], role=row["role"], character_id=row.get("characterId", ""),
                           character_ids=row.get("characterIds", []), occupant=row.get("occupant", "")) for row in rows or []]


def seat_of(row: SessionRow, seat_id: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A copy of an active session's seats and the one named `seat_id` in it (to change, then write back whole)."""
    if row.status != "active":
        raise failed_precondition(f"session {row.id} has ended; its seats do not change", reason="SESSION_ENDED", subject=f"sessions/{row.id}")
    seats = [dict(seat) for seat in row.seats or []]
    seat = next((seat for seat in seats if seat["id"] == seat_id), None)
    if seat is None:
        known = ", ".join(s["id"] for s in seats) or "none"
        raise invalid_argument("seat_id", f"session {row.id} has no seat {seat_id!r} (its seats: {known})")
    return seats, seat


def switch_character(db: Session, request: store_pb2.SetSeatCharacterRequest) -> SessionRow:
    """The seat plays `character_id` from now on; a player character of the world it was not bound to joins its characters."""
    row = db.get(SessionRow, request.session_id)
    if row is None:
        raise session_not_found(request.session_id)
    seats, seat = seat_of(row, request.seat_id)
    character = db.get(CharacterRow, (row.id, request.character_id))
    if character is None:
        raise invalid_argument("character_id", f"{request.character_id!r} is not a character of the session's world")
    bound = list(seat.get("characterIds") or [])
    if request.character_id not in bound:
        if (character.data or {}).get("type") != "player":
            raise invalid_argument("character_id", f"{request.character_id!r} is not one of seat {seat['id']}'s characters, "
                                                   "nor a player character it could take up")
        bound.append(request.character_id)
    seat.update(characterId=request.character_id, characterIds=bound)
    row.seats = seats
    db.flush()
    return row

"""Seats (store.proto Seat): who plays, in which role, as which character; checked the same way by the
scheduler (CreateSession's seats) and the store (what it keeps)."""

from __future__ import annotations

from covel.store.v1 import store_pb2
from shared.errors import invalid_argument

ROLES = ("player", "director")
SEATS_MAX = 16
SEAT_CHARACTERS_MAX = 1000
ID_MAX = 200


def check_seats(seats: list[store_pb2.Seat], characters: set[str] | None, field: str = "seats") -> None:
    """INVALID_ARGUMENT naming `<field>[i]…`; `characters`: the ids the seats may name (None: any)."""
    if len(seats) > SEATS_MAX:
        raise invalid_argument(field, f"has {len(seats)} seats; at most {SEATS_MAX}")
    seen: set[str] = set()
    for index, seat in enumerate(seats):
        where = f"{field}[{index}]"
        if not seat.id or len(seat.id) > ID_MAX or seat.id in seen:
            raise invalid_argument(f"{where}.id", "must be a seat id of its own, e.g. main" if seat.id in seen else f"must be 1 to {ID_MAX} characters")
        seen.add(seat.id)
        if seat.role not in ROLES:
            raise invalid_argument(f"{where}.role", f"is {seat.role or 'unset'}; a seat is a {' or a '.join(ROLES)}")
        if len(seat.character_ids) > SEAT_CHARACTERS_MAX or len(set(seat.character_ids)) != len(seat.character_ids):
            raise invalid_argument(f"{where}.character_ids", f"must list distinct characters, at most {SEAT_CHARACTERS_MAX}")
        if seat.character_id and seat.character_id not in seat.character_ids:
            raise invalid_argument(f"{where}.character_id", f"{seat.character_id!r} is not one of the seat's character_ids")
        unknown = [c for c in seat.character_ids if characters is not None and c not in characters]
        if unknown:
            raise invalid_argument(f"{where}.character_ids", f"{unknown[0]!r} is not a character of the session's world")

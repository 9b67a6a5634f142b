"""Check a submit's actions and render the player message the runtimes read.

Two checks: `validate_actions` when the submit arrives (shape and sizes, no session needed), then
`check_session_actions` once the turn holds its lease (the session's action kinds, seats and
characters; turn/action_kinds.py). Either refuses with INVALID_ARGUMENT naming `actions[i].<field>`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from covel.common.v1 import common_pb2
from covel.store.v1 import store_pb2
from services.scheduler.kinds import ActionSource
from services.scheduler.turn.action_kinds import ALIASES, ActionKindRule, base_rules
from shared.errors import ServiceError, invalid_argument
from shared.security.auth import caller
from shared.structs import from_struct

MAX_ACTION_TEXT = 8000
MAX_ACTIONS = 16
MAX_KIND = 200
BASE_RULES = {rule.kind: rule for rule in base_rules("en")}
PLUGIN_KIND = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[a-z][a-z0-9]*(-[a-z0-9]+)*$")
# A session from before seats: one player seat, playing no character.
IMPLICIT_SEAT = store_pb2.Seat(id="main", role="player")


def validate_actions(actions: list[common_pb2.PlayerAction]) -> list[common_pb2.PlayerAction]:
    """The submit's shape: 1 to MAX_ACTIONS player actions with bounded texts; kinds normalised (`do` is `act`)."""
    if not actions:
        raise invalid_argument("actions", "is empty: submit at least one action, e.g. {kind: 'act', text: 'open the door'}")
    if len(actions) > MAX_ACTIONS:
        raise invalid_argument("actions", f"has {len(actions)} actions; at most {MAX_ACTIONS}")
    checked = []
    for index, action in enumerate(actions):
        kind = ALIASES.get(action.kind, action.kind) or "act"
        if len(kind) > MAX_KIND or (kind not in BASE_RULES and not PLUGIN_KIND.match(kind)):
            raise invalid_argument(f"actions[{index}].kind", f"{action.kind!r} is no action kind: a base kind ({', '.join(BASE_RULES)}) "
                                                             "or <pluginId>/<name>; ListActionKinds lists the session's")
        if kind in BASE_RULES and BASE_RULES[kind].text == "required" and not action.text.strip():
            raise invalid_argument(f"actions[{index}].text", f"is empty: a {kind} action says what happens")
        if action.source not in ("", ActionSource.PLAYER):
            raise invalid_argument(f"actions[{index}].source", "only the kernel submits system actions; leave it empty or 'player'")
        if len(action.text) > MAX_ACTION_TEXT:
            raise invalid_argument(f"actions[{index}].text", f"is {len(action.text)} characters; at most {MAX_ACTION_TEXT}")
        normalized = common_pb2.PlayerAction()
        normalized.CopyFrom(action)
        normalized.kind = kind
        normalized.source = ActionSource.PLAYER
        normalized.seat_id = action.seat_id or "main"
        normalized.text = action.text.strip()
        checked.append(normalized)
    return checked


def check_session_actions(actions: list[common_pb2.PlayerAction], catalogue: Mapping[str, ActionKindRule],
                          seats: list[store_pb2.Seat]) -> None:
    """Each player action against the session: its kind exists, its seat's role may use it, its text, fields and
    actor fit the kind. An actor-taking action without actor_id gets its seat's current character."""
    by_id = {seat.id: seat for seat in seats or [IMPLICIT_SEAT]}
    for index, action in enumerate(actions):
        if action.source == ActionSource.SYSTEM:
            continue
        where = f"actions[{index}]"
        rule = catalogue.get(action.kind)
        if rule is None:
            raise invalid_argument(f"{where}.kind", f"{action.kind!r} is not an action kind of this session "
                                                    f"(base kinds: say, act, narrate, direct, advance, command); ListActionKinds lists them all")
        seat = by_id.get(action.seat_id)
        if seat is None:
            raise invalid_argument(f"{where}.seat_id", f"the session has no seat {action.seat_id!r} (its seats: {', '.join(by_id)})")
        if seat.role not in rule.roles:
            raise invalid_argument(f"{where}.kind", f"a {seat.role} seat cannot {rule.kind}; it is for {' or '.join(rule.roles)} seats")
        if seat.occupant and seat.occupant != _acting_principal():
            raise invalid_argument(f"{where}.seat_id", f"seat {seat.id} is played by another player ({seat.occupant}); "
                                                       "play your own seat, or revoke theirs (RevokeSeat) first")
        _check_text(where, action, rule)
        _check_fields(where, action, rule)
        _check_actor(where, action, rule, seat)


def _acting_principal() -> str:
    """Who submitted the actions ("" for the kernel's own turns, which act for no seat's guest)."""
    try:
        return caller().name
    except ServiceError:
        return ""


def _check_text(where: str, action: common_pb2.PlayerAction, rule: ActionKindRule) -> None:
    if rule.text == "required" and not action.text:
        raise invalid_argument(f"{where}.text", f"is empty: a {rule.kind} action says what happens")
    if rule.text == "none" and action.text:
        raise invalid_argument(f"{where}.text", f"a {rule.kind} action takes no text; put what it needs in fields")


def _check_fields(where: str, action: common_pb2.PlayerAction, rule: ActionKindRule) -> None:
    fields = from_struct(action.fields) if action.HasField("fields") else None
    if fields is None:
        fields = {}
    if rule.schema is None:
        if fields:
            raise invalid_argument(f"{where}.fields", f"a {rule.kind} action takes no fields")
        return
    errors = sorted(rule.validator().iter_errors(fields), key=lambda error: list(error.absolute_path))
    if errors:
        path = "".join(f".{part}" if isinstance(part, str) else f"[{part}]" for part in errors[0].absolute_path)
        raise invalid_argument(f"{where}.fields{path}", f"does not fit {rule.kind}'s fields: {errors[0].message}")


def _check_actor(where: str, action: common_pb2.PlayerAction, rule: ActionKindRule, seat: store_pb2.Seat) -> None:
    if not rule.actor:
        if action.actor_id:
            raise invalid_argument(f"{where}.actor_id", f"a {rule.kind} action is not taken as a character; leave actor_id empty")
        return
    if not action.actor_id:
        action.actor_id = seat.character_id
    elif action.actor_id not in seat.character_ids:
        raise invalid_argument(f"{where}.actor_id", f"{action.actor_id!r} is not one of seat {seat.id}'s characters "
                                                    f"({', '.join(seat.character_ids) or 'it has none'})")



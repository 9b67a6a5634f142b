"""A submit's actions as the runtimes and hook payloads read them: the rendered player message, each action as a dict."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from covel.common.v1 import common_pb2
from covel.store.v1 import store_pb2
from shared.structs import from_struct

PLAIN_KINDS = ("say", "act")


def render_player_message(actions: list[common_pb2.PlayerAction], labels: Mapping[str, str] | None = None,
                          names: Mapping[str, str] | None = None, players: Mapping[str, str] | None = None) -> str:
    """What the runtimes read. One character's say and act stay as written (speech quoted when mixed with deeds);
    anything else is marked with the character's name and the kind's label: 【Aya·whispers】Over here. {"target": "guard"}.
    With `players` (seat id -> who plays it: a session where guests took seats), every action is marked with who acted."""
    actors = {action.actor_id for action in actions}
    plain = not players and len(actors) <= 1 and all(action.kind in PLAIN_KINDS and not _fields(action) for action in actions)
    if plain:
        if len(actions) == 1:
            return actions[0].text
        return "\n".join(f'"{action.text}"' if action.kind == "say" else action.text for action in actions)
    return "\n".join(_marked(action, labels or {}, names or {}, players or {}) for action in actions)


def seat_players(session: store_pb2.Session) -> dict[str, str] | None:
    """Who plays each seat, where guests took seats (None: the owner plays alone): its guest, or the owner for the rest."""
    if not any(seat.occupant for seat in session.seats):
        return None
    return {seat.id: seat.occupant or session.owner or "the host" for seat in session.seats}


def _marked(action: common_pb2.PlayerAction, labels: Mapping[str, str], names: Mapping[str, str], players: Mapping[str, str]) -> str:
    label = labels.get(action.kind, action.kind)
    who = names.get(action.actor_id, action.actor_id) if action.actor_id else players.get(action.seat_id, "")
    fields = _fields(action)
    text = action.text + (f" {json.dumps(fields, ensure_ascii=False)}" if fields else "")
    return f"【{who}·{label}】{text}" if who else f"【{label}】{text}"


def _fields(action: common_pb2.PlayerAction) -> dict[str, Any]:
    return from_struct(action.fields) if action.HasField("fields") else {}


def action_dict(action: common_pb2.PlayerAction) -> dict:
    """An action as ctx.playerActions and hook payloads carry it: fields as given."""
    rendered: dict[str, Any] = {"seatId": action.seat_id, "kind": action.kind, "text": action.text, "source": action.source}
    if action.actor_id:
        rendered["actorId"] = action.actor_id
    if action.HasField("fields"):
        rendered["fields"] = from_struct(action.fields)
    if action.HasField("interaction"):
        rendered["interaction"] = {"id": action.interaction.id, "values": from_struct(action.interaction.values)}
    return rendered

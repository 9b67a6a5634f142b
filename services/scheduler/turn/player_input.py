"""Check a submit's actions and render the player message the runtimes read."""

from __future__ import annotations

from covel.common.v1 import common_pb2
from shared.errors import invalid_argument

PLAYER_KINDS = ("say", "do")
MAX_ACTION_TEXT = 8000
MAX_ACTIONS = 16


def validate_actions(actions: list[common_pb2.PlayerAction]) -> list[common_pb2.PlayerAction]:
    if not actions:
        raise invalid_argument("actions", "is empty: submit at least one action, e.g. {kind: 'do', text: 'open the door'}")
    if len(actions) > MAX_ACTIONS:
        raise invalid_argument("actions", f"has {len(actions)} actions; at most {MAX_ACTIONS}")
    checked = []
    for index, action in enumerate(actions):
        kind = action.kind or "do"
        if kind not in PLAYER_KINDS:
            raise invalid_argument(f"actions[{index}].kind", f"is {action.kind!r}; a player submits one of {', '.join(PLAYER_KINDS)}")
        if action.source not in ("", "player"):
            raise invalid_argument(f"actions[{index}].source", "only the kernel submits system actions; leave it empty or 'player'")
        if not action.text.strip():
            raise invalid_argument(f"actions[{index}].text", "is empty: say what the character does or says")
        if len(action.text) > MAX_ACTION_TEXT:
            raise invalid_argument(f"actions[{index}].text", f"is {len(action.text)} characters; at most {MAX_ACTION_TEXT}")
        normalized = common_pb2.PlayerAction()
        normalized.CopyFrom(action)
        normalized.kind = kind
        normalized.source = "player"
        normalized.seat_id = action.seat_id or "main"
        normalized.text = action.text.strip()
        checked.append(normalized)
    return checked


def render_player_message(actions: list[common_pb2.PlayerAction]) -> str:
    """One player's plain input stays as written; speech is quoted when mixed with deeds."""
    if len(actions) == 1:
        return actions[0].text
    return "\n".join(f'"{action.text}"' if action.kind == "say" else action.text for action in actions)


def action_dict(action: common_pb2.PlayerAction) -> dict:
    rendered = {"seatId": action.seat_id, "kind": action.kind, "text": action.text, "source": action.source}
    if action.actor_id:
        rendered["actorId"] = action.actor_id
    return rendered

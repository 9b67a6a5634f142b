"""A turn's message and load_state's state, shared between hooks replicas.

load_state runs on TurnStart, which one hooks replica serves; the turn's later events (PreLLMCall,
PostContextAssembly, the gateway key message:sent, …) may reach another one. The hookspec adapter keeps
the turn in its own process and also in the plugin's session state (ctx.state: one store call, the
plugin's own keys, shared by every replica); a replica whose process lacks the turn reads it once.

A state that is not JSON data, or larger than ctx.state takes (64 KiB), stays in the replica that loaded
it (logged): hooks another replica runs then see no loaded state, as before.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

from shared.logs import get_logger
from shared.plugin_sdk.session_state import SessionState

log = get_logger(component="hookspecs")
# The plugin's ctx.state key (documented in docs/hookspecs.md: a plugin's own keys should not use it).
KEY = "covel.hookspecs.turn"

# (turn id, the turn's message, load_state's state)
Turn = tuple[str, dict[str, Any], dict[str, Any]]
# Turns whose TurnStart was seen and whose message:sent was not (the newest kept).
_TURNS_LIMIT = 1024


async def share(plugin_id: str, session_id: str, turn: Turn) -> None:
    """Leave the turn where every replica finds it; a state that cannot be shared is logged and kept local."""
    turn_id, message, loaded = turn
    try:
        value = json.loads(json.dumps({"turn_id": turn_id, "message": message, "state": loaded}, ensure_ascii=False))
        await SessionState(session_id, plugin_id).set(KEY, value)
    except (TypeError, ValueError, RuntimeError) as error:
        log.warning("hookspecs.turn_not_shared", plugin_id=plugin_id, session_id=session_id, turn_id=turn_id,
                    why=f"{type(error).__name__}: {error}")


async def fetch(plugin_id: str, session_id: str) -> Turn | None:
    """The session's newest shared turn of this plugin; None when there is none or the store cannot say."""
    try:
        value = await SessionState(session_id, plugin_id).get(KEY)
    except (ValueError, RuntimeError) as error:
        log.warning("hookspecs.turn_not_read", plugin_id=plugin_id, session_id=session_id, why=f"{type(error).__name__}: {error}")
        return None
    if not isinstance(value, dict) or not isinstance(value.get("turn_id"), str):
        return None
    message, loaded = value.get("message"), value.get("state")
    return value["turn_id"], message if isinstance(message, dict) else {}, loaded if isinstance(loaded, dict) else {}


class KnownTurns:
    """One plugin's turns in this process, by session and turn: TurnStart to message:sent. A session may have two at
    once (a detached job's background turn starting before the player's turn's story went out): each event names its
    turn, so neither takes the other's message or state."""

    def __init__(self, plugin_id: str) -> None:
        self.plugin_id = plugin_id
        # (session id, turn id) -> (turn id, the turn's message, load_state's state); the newest last.
        self._turns: OrderedDict[tuple[str, str], Turn] = OrderedDict()
        # (session, turn) that neither this process nor the store knows (asked once).
        self._unshared: OrderedDict[tuple[str, str], None] = OrderedDict()

    def get(self, session_id: str, turn_id: str) -> Turn | None:
        return self._turns.get((session_id, turn_id))

    def forget(self, session_id: str, turn_id: str) -> None:
        self._turns.pop((session_id, turn_id), None)

    def remember(self, session_id: str, turn: Turn) -> None:
        self._turns[(session_id, turn[0])] = turn
        self._turns.move_to_end((session_id, turn[0]))
        while len(self._turns) > _TURNS_LIMIT:
            self._turns.popitem(last=False)

    def newest(self, session_id: str) -> Turn | None:
        return next((turn for (session, _), turn in reversed(self._turns.items()) if session == session_id), None)

    async def known(self, session_id: str, turn_id: str) -> Turn | None:
        """The session's turn `turn_id` (its newest when empty: an event that names no turn), read from the store once
        when this process lacks it; None when nobody knows it."""
        turn = self._turns.get((session_id, turn_id)) if turn_id else self.newest(session_id)
        if not session_id or turn is not None or (session_id, turn_id) in self._unshared:
            return turn
        found = await fetch(self.plugin_id, session_id)
        if found is not None and (found[0] == turn_id or not turn_id):
            self.remember(session_id, found)
            return found
        self._unshared[(session_id, turn_id)] = None
        while len(self._unshared) > _TURNS_LIMIT:
            self._unshared.popitem(last=False)
        return None

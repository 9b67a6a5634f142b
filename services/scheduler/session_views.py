"""PluginSessionView: what a plugin's store.get_session() answers (a handler's ctx.store, a tool's or an action's
context.store): the session's phase, completed player turns, locale and setup progress, the kernel's bookkeeping
(versions, attempts) left out. Not the session record itself."""

from __future__ import annotations

from typing import Any

from covel.store.v1 import store_pb2
from shared.structs import from_struct

BOOKKEEPING = ("version", "attempts")


def session_view(session: store_pb2.Session) -> dict[str, Any]:
    return {
        "phase": session.phase,
        "completedPlayerTurns": session.completed_player_turns,
        "locale": session.locale,
        "setupRuntimes": {runtime_id: {k: v for k, v in from_struct(progress).items() if k not in BOOKKEEPING}
                          for runtime_id, progress in session.setup_runtimes.items()},
    }

"""Where a tape mirror (plugin_side/tape_mirror.py) reads a session's committed turns from, set per call: in the
hooks service a StoreTurns (services/hooks/store_turns.py), in a sandbox worker a WorkerTurns (the host answers)."""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any, Protocol


class CommittedTurns(Protocol):
    """A session's committed turns with a story, oldest first, a page at a time:
    ([{turn_id, user, story, message_id}], the next page's token or "")."""

    async def page(self, session_id: str, page_token: str) -> tuple[list[dict[str, Any]], str]: ...


COMMITTED_TURNS: ContextVar[CommittedTurns | None] = ContextVar("covel_committed_turns", default=None)

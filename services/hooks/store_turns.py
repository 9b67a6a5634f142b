"""A session's committed turns for a tape mirror (plugin_side/tape_mirror.py), read by the host: StoreTurns from
the store service, and `with_turns`, the `turns` capability a sandboxed event call gets, bound to its session
(plugin code never holds the store's stub and reads no other session).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from covel.store.v1 import store_pb2, store_pb2_grpc
from services.hooks.common.committed_turns import COMMITTED_TURNS

TURNS_PAGE_SIZE = 200


class StoreTurns:
    """CommittedTurns from the store service (ListTurns; the hooks service's store policy row)."""

    def __init__(self, store: store_pb2_grpc.TransactionalStoreStub) -> None:
        self._store = store

    async def page(self, session_id: str, page_token: str) -> tuple[list[dict[str, Any]], str]:
        reply = await self._store.ListTurns(store_pb2.ListTurnsRequest(
            session_id=session_id, page_size=TURNS_PAGE_SIZE, page_token=page_token))
        turns = []
        for turn in reply.turns:
            # message:sent fires only for a committed turn with a story: the same turns, the same entries. A turn off
            # the story's line (rewound past, a version not chosen) is history no mirror tells again.
            if turn.status != store_pb2.TURN_STATUS_COMMITTED or not turn.narrative or turn.off_line:
                continue
            story = next((message.id for message in turn.messages if message.role == "story" and message.id), None)
            turns.append({"turn_id": turn.id, "user": turn.player_message, "story": turn.narrative, "message_id": story})
        return turns, reply.next_page_token


Capability = Callable[[str, list[Any], dict[str, Any]], Awaitable[Any]]


def with_turns(others: Capability | None, session_id: str) -> Capability:
    """A sandboxed event call's capabilities plus `turns(page_token)`: that session's committed turns only, read by
    the host (COMMITTED_TURNS of the EmitEvent it serves); any other operation goes to `others`."""

    async def capability(op: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if op != "turns":
            if others is None:
                raise LookupError(f"an event call has no capability {op!r}")
            return await others(op, args, kwargs)
        source = COMMITTED_TURNS.get()
        if len(args) != 1 or not isinstance(args[0], str) or kwargs:
            raise LookupError("the capability is turns(page_token)")
        if source is None:
            raise LookupError("this hooks service reads no committed turns")
        turns, next_token = await source.page(session_id, args[0])
        return {"turns": turns, "next": next_token}

    return capability

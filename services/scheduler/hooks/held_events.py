"""Hook events sent together instead of one Dispatch each (docs/hooks.md, "Watching" and "Events sent together").

- A turn's events that only watchers take are held and go in one DispatchObserved call with its TurnStop, whose
  handlers cannot change anything either (parallel, no guard, no replace): one call before the commit, not two.
- The PostStateCommit events of a turn's committed proposals go in one call, not one each. Those that only
  watchers take are sent after the turn has answered its caller, in the background: a session's later events wait
  for them (`settled`), so a watcher still hears its session's events in order on this scheduler.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

import grpc

from covel.common.v1 import common_pb2
from covel.hooks.v1 import hooks_pb2
from services.scheduler import outages
from shared.logs import get_logger

log = get_logger(component="hook_bus")

# As the hooks service takes at once (services/hooks/server.py MAX_OBSERVED_EVENTS).
OBSERVED_PER_CALL = 256

# DispatchObserved, on the named turn's stream while it runs (bus.py).
Send = Callable[[hooks_pb2.DispatchObservedRequest, str], Awaitable[hooks_pb2.DispatchObservedResponse]]


class HeldEvents:
    def __init__(self, send: Send) -> None:
        self._send = send
        # turn id -> events only watchers take, sent with the turn's TurnStop (send_with).
        self._held: dict[str, list[hooks_pb2.DispatchRequest]] = {}
        # session id -> the background send of its last turn's watcher-only PostStateCommit events.
        self._after: dict[str, asyncio.Task[None]] = {}

    def hold(self, turn_id: str, request: hooks_pb2.DispatchRequest) -> None:
        self._held.setdefault(turn_id, []).append(request)

    def drop(self, turn_id: str) -> None:
        """A turn cancelled or failed midway: its watchers hear nothing more of it."""
        self._held.pop(turn_id, None)

    async def send_with(self, turn_id: str, *extra: hooks_pb2.DispatchRequest) -> list[common_pb2.HookTraceEntry]:
        """The turn's held events, then `extra`, in one call (more only past OBSERVED_PER_CALL); their trace."""
        return await self.send([*self._held.pop(turn_id, []), *extra], turn_id)

    async def send(self, events: Sequence[hooks_pb2.DispatchRequest], turn_id: str = "") -> list[common_pb2.HookTraceEntry]:
        trace: list[common_pb2.HookTraceEntry] = []
        for start in range(0, len(events), OBSERVED_PER_CALL):
            reply = await self._send(hooks_pb2.DispatchObservedRequest(events=events[start:start + OBSERVED_PER_CALL]), turn_id)
            trace.extend(reply.trace)
        return trace

    def send_after(self, session_id: str, events: Sequence[hooks_pb2.DispatchRequest]) -> None:
        """Send `events` in the background, after whatever this session still has in flight."""
        if not events:
            return
        before = self._after.get(session_id)
        task = asyncio.create_task(self._send_later(session_id, before, list(events)))
        self._after[session_id] = task
        task.add_done_callback(lambda done: self._after.pop(session_id, None) if self._after.get(session_id) is done else None)

    async def _send_later(self, session_id: str, before: asyncio.Task[None] | None,
                          events: list[hooks_pb2.DispatchRequest]) -> None:
        if before is not None:
            await asyncio.wait([before])
        try:
            await self.send(events)  # a watcher that fails is logged and counted by the hooks service, as at any event
        except grpc.aio.AioRpcError as error:
            outages.note("hooks", error)
            log.warning("hooks.watchers_not_told", session_id=session_id, events=len(events), code=error.code().name,
                        details=error.details())

    async def settled(self, session_id: str) -> None:
        """Wait until the session's background sends have been answered (the next event of the session goes after)."""
        pending = self._after.get(session_id)
        if pending is not None:
            await asyncio.wait([pending])

"""Where a turn's events go: the client's stream (concealed runtimes hidden) and the turn record's hook trace."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from covel.common.v1 import common_pb2
from covel.scheduler.internal.v1 import turn_events_pb2
from covel.store.v1 import store_pb2
from services.scheduler.execution.runtime_scope import Emit
from services.scheduler.turn.concealment import conceal_event


def concealing(emit: Emit, concealed: set[str]) -> Emit:
    """`emit` with what concealed runtimes show the client hidden (concealment.py); `emit` itself when none is."""
    if not concealed:
        return emit

    async def emit_shown(event: turn_events_pb2.TurnEvent) -> None:
        shown = conceal_event(event, concealed)
        if shown is not None:
            await emit(shown)

    return emit_shown


@dataclass
class TurnStream:
    """The turn's record and the stream its events go to."""

    turn: store_pb2.Turn
    emit: Emit

    async def record(self, trace: Iterable[common_pb2.HookTraceEntry]) -> None:
        """Hook trace entries: kept on the turn record and streamed as they come."""
        for entry in trace:
            self.turn.hook_trace.append(entry)
            await self.emit(turn_events_pb2.TurnEvent(hook=entry))

    async def runtime_started(self, runtime_id: str, stage: str) -> None:
        await self.emit(turn_events_pb2.TurnEvent(runtime_started=turn_events_pb2.RuntimeStarted(runtime_id=runtime_id, stage=stage)))

    async def runtime_finished(self, runtime_id: str, status: str, reason: str, duration_ms: int = 0) -> None:
        await self.emit(turn_events_pb2.TurnEvent(runtime_finished=turn_events_pb2.RuntimeFinished(
            runtime_id=runtime_id, status=status, reason=reason, duration_ms=duration_ms)))

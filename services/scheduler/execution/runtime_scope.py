"""What one runtime execution gets from its turn (RuntimeScope): the turn's shared reads, the upstream values
its inputs bind from, its kernel inputs, its activation and player actions, and the stream its progress goes to.
The turn builds one per runtime as it starts it (turn/state.py); a nested execution derives its own."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from covel.scheduler.internal.v1 import turn_events_pb2
from services.scheduler.execution.origins import RECURSIVE_EXECUTION
from services.scheduler.execution.turn_shared import TurnShared

# Where a turn's events go: the client's stream (concealed runtimes hidden), once wrapped (turn/stream.py).
Emit = Callable[[turn_events_pb2.TurnEvent], Awaitable[None]]


async def unseen_events(_event: turn_events_pb2.TurnEvent) -> None:
    """The emit of an execution whose events reach no client stream (a settlement retry, an action, a nested run)."""


@dataclass(frozen=True)
class RuntimeScope:
    """One runtime's view of its turn as it starts: what its execution reads, never the turn's bookkeeping."""

    turn: TurnShared
    # The turn's events stream: progress reports and story text go onto it.
    emit: Emit = unseen_events
    # Turn-scope inputs bind from these: runtime id -> output, contract -> its producers in completion order.
    outputs: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    providers: Mapping[str, list[str]] = field(default_factory=dict)
    # turn-digest@1, operations@1 and world.dimensions@1 as they stand now; None when the runtime declares no kernel input.
    kernel_inputs: dict[str, Any] | None = None
    # The latest PlayerInputSubmission (ctx.session.lastPlayerInput), frozen once per turn.
    last_player_input: dict[str, Any] | None = None
    # ctx.activation, the player actions it is handed (none for an event follower) and why the turn runs.
    activation: dict[str, Any] = field(default_factory=dict)
    player_actions: tuple[dict[str, Any], ...] = ()
    origin: str = ""
    # A detached job's or a settlement retry's run: its inputs as the source turn bound them.
    source_inputs: dict[str, Any] | None = None
    # ctx.execution.sourceTurnId: a RetryTurn's run, the committed turn it runs again ("" otherwise).
    source_turn_id: str = ""
    # A nested execution (ctx.recursive_call): it sees only its own upstream, never its parent's.
    nested: bool = False

    def nested_call(self, activation: dict[str, Any] | None) -> RuntimeScope:
        """The scope of a nested execution this one starts: no upstream, no player actions, no stream of its own."""
        return replace(self, emit=unseen_events, outputs={}, providers={}, kernel_inputs=None, activation=activation or {},
                       player_actions=(), origin=RECURSIVE_EXECUTION, source_inputs=None, nested=True)

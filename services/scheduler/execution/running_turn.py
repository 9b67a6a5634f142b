"""The turn a scheduler is running for a session: its task, why it was cancelled, its handlers' signals (for Cancel)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from shared.plugin_sdk import CancellationSignal


@dataclass
class RunningTurn:
    turn_id: str
    task: asyncio.Task[Any]
    # Why it runs (TurnOrigin's value): an interjection joins a player's turn only.
    origin: str = "player"
    cancel_reason: str = ""
    # The cancellation signals of the handlers running in this turn.
    signals: list[CancellationSignal] = field(default_factory=list)

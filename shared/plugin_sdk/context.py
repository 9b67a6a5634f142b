"""The context every hook handler receives (spec: Context), the same shape for all events."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any


class CancellationSignal:
    """Fires when the execution is cancelled or the handler passes its timeout.

    Pass it to anything that may wait: `await ctx.signal.wait()`, or check `ctx.signal.aborted`.
    """

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self.reason = ""

    @property
    def aborted(self) -> bool:
        return self._event.is_set()

    def abort(self, reason: str) -> None:
        if not self._event.is_set():
            self.reason = reason
            self._event.set()

    async def wait(self) -> None:
        await self._event.wait()


@dataclass(frozen=True)
class HookContext:
    event: str
    session_id: str
    # "" for SessionStart and SessionEnd.
    turn_id: str
    locale: str
    active_plugin_ids: tuple[str, ...]
    signal: CancellationSignal
    # Only for runtime-scoped events: the runtime the event is about (not the handler's plugin).
    plugin_id: str | None = None
    runtime_id: str | None = None
    logical_turn: int | None = None
    _own_settings: Mapping[str, Any] = field(default_factory=dict, repr=False)

    def get_own_settings(self) -> Mapping[str, Any]:
        """The handler's own plugin settings, read-only."""
        return MappingProxyType(dict(self._own_settings))

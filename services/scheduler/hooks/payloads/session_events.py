"""The session's hook payloads: SessionStart and SessionEnd."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from services.scheduler.hooks.payloads.base import HookPayload


@dataclass(frozen=True)
class SessionStart(HookPayload):
    """After a new session is stored: `{sessionId, worldId?}` (worldId only for a session started in a world)."""

    event: ClassVar[str] = "SessionStart"
    session_id: str
    world_id: str = ""

    def wire(self) -> dict[str, Any]:
        return {"sessionId": self.session_id, **({"worldId": self.world_id} if self.world_id else {})}


@dataclass(frozen=True)
class SessionEnd(HookPayload):
    """When a session is ended or deleted: `{sessionId, reason}`."""

    event: ClassVar[str] = "SessionEnd"
    session_id: str
    reason: str

    def wire(self) -> dict[str, Any]:
        return {"sessionId": self.session_id, "reason": self.reason}

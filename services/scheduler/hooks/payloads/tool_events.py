"""The hook payloads around one tool call: PreToolUse and PostToolUse."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from services.scheduler.hooks.payloads.base import HookPayload


@dataclass(frozen=True)
class PreToolUse(HookPayload):
    """Before a tool call: `{toolCall: {id, name, arguments}}` (`arguments` the model's JSON text)."""

    event: ClassVar[str] = "PreToolUse"
    tool_call: dict[str, Any]

    def wire(self) -> dict[str, Any]:
        return {"toolCall": self.tool_call}


@dataclass(frozen=True)
class PostToolUse(HookPayload):
    """After a tool call ran: `{toolCall, result: {result, success}}` (`result.result` the text the model would read)."""

    event: ClassVar[str] = "PostToolUse"
    tool_call: dict[str, Any]
    result_text: str
    success: bool

    def tool_result(self) -> dict[str, Any]:
        """The call's result as hooks are shown it (and PostToolUse's replace.result rewrites)."""
        return {"result": self.result_text, "success": self.success}

    def wire(self) -> dict[str, Any]:
        return {"toolCall": self.tool_call, "result": self.tool_result()}

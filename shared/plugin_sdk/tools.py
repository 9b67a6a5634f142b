"""What a plugin tool handler sees: `handler(ctx, args)` returns the tool's data or raises ToolError."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from shared.plugin_sdk.context import CancellationSignal
from shared.plugin_sdk.private_payload import json_copy


class ToolError(Exception):
    """A tool's own failure, with a code the model can act on (e.g. not-found, invalid-input)."""

    def __init__(self, code: str, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.hint = hint


@dataclass
class ToolContext:
    session_id: str
    turn_id: str
    locale: str
    # The runtime whose model called the tool.
    runtime_id: str
    logical_turn: int
    signal: CancellationSignal = field(default_factory=CancellationSignal)
    _own_settings: Mapping[str, Any] = field(default_factory=dict, repr=False)

    def get_own_settings(self) -> Mapping[str, Any]:
        return MappingProxyType(json_copy(dict(self._own_settings)))


def tool_ok(data: Any) -> dict[str, Any]:
    return {"ok": True, "data": data}


def tool_error(code: str, message: str, hint: str = "") -> dict[str, Any]:
    error = {"code": code, "message": message}
    if hint:
        error["hint"] = hint
    return {"ok": False, "error": error}

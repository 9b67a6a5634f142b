"""What a hook handler's return value means (docs/hooks.md, "Results"): read by the dispatcher on the host and, for
a batch's chain, by the worker that runs the handlers (plugin_side/hook_batches.py), with the same rule."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any


class HandlerFailed(Exception):
    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def parse_result(replace_fields: Collection[str], result: Any) -> tuple[str, str, dict[str, Any] | None]:
    """(action, reason, replace) from what a handler returned, `replace` limited to the event's fields;
    HandlerFailed("invalid-result") when malformed."""
    if result is None:
        return "continue", "", None
    if not isinstance(result, Mapping):
        raise HandlerFailed("invalid-result", f"returned {type(result).__name__}; return None or a dict with action")
    action = result.get("action", "continue")
    if action == "abort":
        reason = result.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            raise HandlerFailed("invalid-result", "returned abort without a reason string")
        return "abort", reason, None
    if action != "continue":
        raise HandlerFailed("invalid-result", f"returned action {action!r}; use 'continue' or 'abort'")
    replace = result.get("replace")
    if replace is None:
        return "continue", "", None
    if not isinstance(replace, Mapping):
        raise HandlerFailed("invalid-result", f"returned replace of type {type(replace).__name__}; it must be a dict")
    return "continue", "", {key: value for key, value in replace.items() if key in replace_fields}

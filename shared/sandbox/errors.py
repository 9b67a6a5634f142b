"""Exceptions across the channel: sent as {type, base, message, code?, hint?}, raised on the other
side as an exception of the same name (deriving from the nearest builtin one it had), so messages
such as "raised KeyError: 'x'" and `except LookupError` read as they did in one process."""

from __future__ import annotations

import builtins
import re
from typing import Any

from shared.plugin_sdk.tools import ToolError


class RemoteError(Exception):
    """An exception raised on the other side of a sandbox channel."""


class WorkerGone(RemoteError):
    """The worker exited, was killed, or broke the channel, while a call was in flight."""


_classes: dict[tuple[str, str], type[Exception]] = {}
_MAX_CLASSES = 512


def _builtin_base(error: BaseException) -> str:
    for kind in type(error).__mro__:
        if getattr(builtins, kind.__name__, None) is kind and issubclass(kind, Exception):
            return kind.__name__
    return "Exception"


def describe(error: BaseException) -> dict[str, Any]:
    found: dict[str, Any] = {"type": type(error).__name__, "base": _builtin_base(error), "message": str(error)}
    if isinstance(error, ToolError):
        found.update(code=error.code, message=error.message, hint=error.hint)
    return found


def rebuild(described: Any) -> Exception:
    """The exception `describe` sent; anything malformed becomes a RemoteError saying so."""
    if not isinstance(described, dict):
        return RemoteError("the other side sent an error that is not an object")
    name, message = str(described.get("type") or "Error"), str(described.get("message") or "")
    if name == "ToolError" and isinstance(described.get("code"), str):
        return ToolError(described["code"], message, str(described.get("hint") or ""))
    base = getattr(builtins, str(described.get("base") or ""), None)
    if not (isinstance(base, type) and issubclass(base, Exception)) or base in (SystemExit, KeyboardInterrupt):
        base = Exception
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,80}", name):
        name = "RemoteError"
    kind = _classes.get((name, base.__name__))
    if kind is None:
        if len(_classes) >= _MAX_CLASSES:
            _classes.clear()
        kind = _classes[(name, base.__name__)] = type(name, (RemoteError, base), {"__module__": "plugin"})
    return kind(message)

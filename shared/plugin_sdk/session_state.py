"""ctx.state: a hook handler's state in its session, kept by the store (docs/hooks.md "Session state").

Hook handlers do not propose, and the hooks service may run as several replicas, any of which may
serve the next event: what a handler must remember (a count, the receipt of this turn's dice) goes
here, one store call per access, shared by every replica and gone with the session. Keys are the
handler's own plugin's; values are JSON (64 KiB at most, 256 keys a session). The methods are
coroutines: use them from `async def` handlers.

Whoever runs the handler sets STATE_BACKEND for it: the hooks service (a store client), or a
plugin's sandbox worker (which asks the hooks service, that binds the session and the plugin).
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any, Protocol

from shared.plugin_sdk.private_payload import json_copy


class StateBackend(Protocol):
    async def access(self, session_id: str, plugin_id: str, op: str, key: str, value: Any = None) -> tuple[bool, Any]:
        """(found, the key's value after op); op is get, set, add or delete."""


STATE_BACKEND: ContextVar[StateBackend | None] = ContextVar("covel_hook_state_backend", default=None)


class SessionState:
    __slots__ = ("_plugin_id", "_session_id")

    def __init__(self, session_id: str, plugin_id: str) -> None:
        self._session_id = session_id
        self._plugin_id = plugin_id

    async def get(self, key: str, default: Any = None) -> Any:
        found, value = await self._access("get", key)
        return value if found else default

    async def set(self, key: str, value: Any) -> None:
        await self._access("set", key, json_copy(value))

    async def add(self, key: str, amount: int | float = 1) -> int | float:
        """Add `amount` to the key's number (0 when unset), atomically across replicas; the new number."""
        if isinstance(amount, bool) or not isinstance(amount, (int, float)):
            raise TypeError(f"ctx.state.add({key!r}, {amount!r}): the amount is a number")
        _, value = await self._access("add", key, amount)
        return value

    async def delete(self, key: str) -> None:
        await self._access("delete", key)

    async def _access(self, op: str, key: str, value: Any = None) -> tuple[bool, Any]:
        if not isinstance(key, str) or not key:
            raise ValueError(f"ctx.state: a key is a non-empty string, not {key!r}")
        backend = STATE_BACKEND.get()
        if backend is None:
            raise RuntimeError("ctx.state is for hook handlers the hooks service runs")
        return await backend.access(self._session_id, self._plugin_id, op, key, value)

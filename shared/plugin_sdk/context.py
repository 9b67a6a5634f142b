"""The context every hook handler receives (spec: Context), the same shape for all events.

One `ExecutionView` is built per dispatch and shared; each handler gets a small
`HookContext` over it, so building a context costs next to nothing per handler.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

from shared.plugin_sdk.plugin_log import PluginLog
from shared.plugin_sdk.private_payload import json_copy
from shared.plugin_sdk.session_state import SessionState


class CancellationSignal:
    """Fires when the execution is cancelled or the handler passes its timeout.

    Await `ctx.signal.wait()` next to anything that may wait, or check `ctx.signal.aborted`.
    """

    __slots__ = ("_event", "reason")

    def __init__(self, reason: str = "") -> None:
        self._event = asyncio.Event()
        self.reason = ""
        if reason:
            self.abort(reason)

    @property
    def aborted(self) -> bool:
        return self._event.is_set()

    def abort(self, reason: str) -> None:
        if not self._event.is_set():
            self.reason = reason
            self._event.set()

    async def wait(self) -> None:
        await self._event.wait()


class SessionEnvironment(NamedTuple):
    """What the plugin's provide_environment gave a session (services/hooks/plugin_side/environments.py): its variables
    and its workspace folder, as the plugin's own code sees them (never os.environ)."""

    variables: Mapping[str, str]
    workspace: Path | None


class ExecutionView(NamedTuple):
    """What every handler of one dispatch shares.

    A NamedTuple rather than a frozen dataclass: one is built per dispatch, and a tuple is
    built in a fifth of the time (bench/hook_dispatch.py); it is just as read-only.
    """

    event: str
    session_id: str
    turn_id: str
    locale: str
    active_plugin_ids: tuple[str, ...]
    plugin_id: str | None = None
    runtime_id: str | None = None
    logical_turn: int | None = None
    plugin_settings: Mapping[str, Mapping[str, Any]] = MappingProxyType({})
    # Runtime-scoped events only (None otherwise): which execution of the runtime (hooks.proto HookContext).
    execution_id: str | None = None
    root_execution_id: str | None = None
    # Subagent runs only ("" for any other execution of a runtime-scoped event).
    subagent_call_id: str | None = None
    parent_runtime_id: str | None = None


class HookContext:
    """ctx: event, session_id, turn_id, locale, plugin_id, runtime_id, active_plugin_ids,
    logical_turn, execution_id, root_execution_id, subagent_call_id, parent_runtime_id,
    get_own_settings(), signal, state, log, environment, workspace."""

    # `_signal` stays unset until a handler or the kernel needs it: most handlers never do; so does
    # `_environment` unless the handler's plugin implements provide_environment.
    __slots__ = ("_environment", "_handler_plugin_id", "_signal", "_view")
    _signal: CancellationSignal
    _environment: SessionEnvironment

    def __init__(self, view: ExecutionView, handler_plugin_id: str) -> None:
        self._view = view
        self._handler_plugin_id = handler_plugin_id

    event = property(lambda self: self._view.event)
    session_id = property(lambda self: self._view.session_id)
    # "" for SessionStart and SessionEnd.
    turn_id = property(lambda self: self._view.turn_id)
    locale = property(lambda self: self._view.locale)
    active_plugin_ids = property(lambda self: self._view.active_plugin_ids)
    # Only for runtime-scoped events: the runtime the event is about (not the handler's plugin).
    plugin_id = property(lambda self: self._view.plugin_id)
    runtime_id = property(lambda self: self._view.runtime_id)
    logical_turn = property(lambda self: self._view.logical_turn)
    # Runtime-scoped events: the execution the event belongs to. Several executions of one runtime can
    # run at once (subagents of one provider, nested runs); turn_id + runtime_id do not tell them apart.
    # A scheduled runtime's run: its run id (root_execution_id is the same); a subagent run: its call id;
    # a nested run (ctx.recursive_call): its own id. root_execution_id: the scheduled run it belongs to.
    execution_id = property(lambda self: self._view.execution_id)
    root_execution_id = property(lambda self: self._view.root_execution_id)
    # Subagent runs only: the delegate / ctx.agents.run call's id and the runtime that delegated it.
    subagent_call_id = property(lambda self: self._view.subagent_call_id)
    parent_runtime_id = property(lambda self: self._view.parent_runtime_id)

    @property
    def signal(self) -> CancellationSignal:
        try:
            return self._signal
        except AttributeError:
            self._signal = CancellationSignal()
            return self._signal

    def abort(self, reason: str) -> None:
        """Fire the signal (kernel side: timeout or cancellation)."""
        self.signal.abort(reason)

    @property
    def log(self) -> PluginLog:
        """The handler's plugin's log lines (`ctx.log.info("…", key=value)`: plugin_log.py), with its plugin id and the
        session and turn of the event."""
        return PluginLog(self._handler_plugin_id)

    @property
    def state(self) -> SessionState:
        """The handler's plugin's state in this session, shared by every hooks replica (session_state.py)."""
        return SessionState(self._view.session_id, self._handler_plugin_id)

    def get_own_settings(self) -> Mapping[str, Any]:
        """The handler's own plugin settings, read-only."""
        return MappingProxyType(json_copy(dict(self._view.plugin_settings.get(self._handler_plugin_id, {}))))

    @property
    def environment(self) -> Mapping[str, str]:
        """The variables the handler's plugin gave this session (provide_environment), read-only; empty without."""
        found: SessionEnvironment | None = getattr(self, "_environment", None)
        return MappingProxyType(dict(found.variables)) if found is not None else MappingProxyType({})

    @property
    def workspace(self) -> Path | None:
        """The session's workspace folder of the handler's plugin (provide_environment); None without."""
        found: SessionEnvironment | None = getattr(self, "_environment", None)
        return found.workspace if found is not None else None

    def __repr__(self) -> str:
        return f"HookContext(event={self.event!r}, session_id={self.session_id!r}, turn_id={self.turn_id!r})"

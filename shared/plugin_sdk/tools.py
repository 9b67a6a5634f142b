"""What a plugin tool handler sees: `handler(ctx, args)` returns the tool's data or raises ToolError."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from shared.plugin_sdk.context import CancellationSignal, SessionEnvironment
from shared.plugin_sdk.frozen import freeze
from shared.plugin_sdk.private_payload import json_copy
from shared.plugin_sdk.seeded_random import SeededRandom
from shared.plugin_sdk.world_preview import FrozenWorld


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
    # Player messages recorded in the session with this turn's own, setup answers included (spec: turnNumber).
    turn_number: int = 0
    signal: CancellationSignal = field(default_factory=CancellationSignal)
    _own_settings: Mapping[str, Any] = field(default_factory=dict, repr=False)
    # Proposals the tool made; they commit with the calling runtime, only if the call succeeded.
    proposals: list[dict[str, Any]] = field(default_factory=list, repr=False)
    # The plugin's own data as the calling agent run sees it, {namespace: {key: value}} (empty when a
    # function or an action calls: they read their data through ctx.plugin_data).
    _plugin_data: Mapping[str, Mapping[str, Any]] = field(default_factory=dict, repr=False)
    # What the tool's plugin's provide_environment gave this session (set where the tool runs).
    _environment: SessionEnvironment | None = field(default=None, repr=False)
    # context.random: the host's random source, seeded by COVEL_RANDOM_SEED as a function's ctx.random is.
    random: SeededRandom = field(default_factory=lambda: SeededRandom(os.urandom(16).hex()), repr=False)
    # context.world's values ({characterSchema, characters, dimensions, seats, worldRecord}) as the calling execution
    # saw them, and context.store.get_session()'s view; None when the call came without them (an extension provider).
    _world_data: Mapping[str, Any] | None = field(default=None, repr=False)
    _session_view: Mapping[str, Any] | None = field(default=None, repr=False)
    _world: FrozenWorld | None = field(default=None, init=False, repr=False)

    @property
    def world(self) -> FrozenWorld | None:
        """The calling execution's world view, frozen (the committed world with the world proposals it sees, and the
        ones this call proposes); None when the call came without one."""
        if self._world is None and self._world_data is not None:
            self._world = FrozenWorld(self._world_data)
        return self._world

    @property
    def store(self) -> ToolStore:
        """context.store.get_session(): the session view {phase, completedPlayerTurns, locale, setupRuntimes}."""
        return ToolStore(self._session_view)

    @property
    def environment(self) -> Mapping[str, str]:
        """The variables the tool's plugin gave this session (provide_environment), read-only; empty without."""
        return MappingProxyType(dict(self._environment.variables) if self._environment is not None else {})

    @property
    def workspace(self) -> Path | None:
        """The session's workspace folder of the tool's plugin (provide_environment); None without."""
        return self._environment.workspace if self._environment is not None else None

    def get_own_settings(self) -> Mapping[str, Any]:
        return MappingProxyType(json_copy(dict(self._own_settings)))

    def get_plugin_data(self, namespace: str, key: str, default: Any = None) -> Any:
        """One record of the plugin's own data as the calling run sees it (a copy)."""
        records = self._plugin_data.get(namespace) or {}
        return json_copy(records[key]) if key in records else default

    def list_plugin_data(self, namespace: str) -> dict[str, Any]:
        """A namespace of the plugin's own data as the calling run sees it, {key: value} (a copy)."""
        return json_copy(dict(self._plugin_data.get(namespace) or {}))

    def propose(self, type: str, payload: Mapping[str, Any]) -> None:
        """A tool-born proposal (plugin.data, plugin.data.update, plugin.data.delete, plugin.data.batch,
        character.upsert, dimension.update), attributed to the tool's plugin, checked at commit."""
        if type not in TOOL_PROPOSAL_TYPES:
            raise ToolError("internal", f"propose({type!r}): a tool may propose {', '.join(TOOL_PROPOSAL_TYPES)}")
        self.proposals.append({"type": type, "payload": json_copy(dict(payload))})
        if self.world is not None:
            self.world.buffer(type, payload)

    def set_plugin_data(self, namespace: str, key: str, value: Any) -> None:
        self.propose("plugin.data", {"namespace": namespace, "key": key, "value": value})

    def update_plugin_data(self, namespace: str, key: str, operations: list[dict[str, Any]]) -> None:
        self.propose("plugin.data.update", {"namespace": namespace, "key": key, "operations": list(operations)})

    def delete_plugin_data(self, namespace: str, key: str) -> None:
        self.propose("plugin.data.delete", {"namespace": namespace, "key": key})


class ToolStore:
    def __init__(self, view: Mapping[str, Any] | None) -> None:
        self._view = view

    async def get_session(self) -> Mapping[str, Any]:
        """The session view the call was sent with (frozen); raises when it came without one."""
        if self._view is None:
            raise LookupError("store.get_session(): this call has no session (an extension provider is not given one)")
        return freeze(json_copy(dict(self._view)))


TOOL_PROPOSAL_TYPES = ("plugin.data", "plugin.data.update", "plugin.data.delete", "plugin.data.batch",
                       "character.upsert", "dimension.update")


def tool_ok(data: Any) -> dict[str, Any]:
    return {"ok": True, "data": data}


def tool_error(code: str, message: str, hint: str = "") -> dict[str, Any]:
    error = {"code": code, "message": message}
    if hint:
        error["hint"] = hint
    return {"ok": False, "error": error}

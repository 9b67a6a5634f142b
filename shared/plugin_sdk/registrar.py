"""The `covel` object an entry module's `register(covel)` receives."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from shared.hook_events import DEFAULT_HOOK_TIMEOUT_MS, ENFORCE_GROUPS, EVENTS_BY_NAME


class RegistrationError(ValueError):
    """A call to the registrar that can never work (unknown event, bad option)."""


@dataclass(frozen=True)
class HookRegistration:
    plugin_id: str
    event: str
    handler: Callable[..., Any]
    match: Callable[[Any], bool] | None
    timeout_ms: int
    enforce: str
    # Position among all of this plugin's registrations, for the "registration order" rule.
    order: int


@dataclass(frozen=True)
class ToolRegistration:
    plugin_id: str
    name: str
    description: str
    parameters: dict[str, Any]
    handler: Callable[..., Any]
    read_only: bool


@dataclass
class PluginRegistrar:
    plugin_id: str
    hooks: list[HookRegistration] = field(default_factory=list)
    tools: list[ToolRegistration] = field(default_factory=list)

    def on(
        self,
        event: str,
        handler: Callable[..., Any],
        *,
        match: Callable[[Any], bool] | None = None,
        timeout_ms: int = DEFAULT_HOOK_TIMEOUT_MS,
        enforce: str = "normal",
    ) -> None:
        if event not in EVENTS_BY_NAME:
            raise RegistrationError(f"covel.on({event!r}): unknown hook event; use one of {', '.join(EVENTS_BY_NAME)}")
        if enforce not in ENFORCE_GROUPS:
            raise RegistrationError(f"covel.on({event!r}, enforce={enforce!r}): enforce is pre, normal or post")
        if not callable(handler):
            raise RegistrationError(f"covel.on({event!r}): the handler is not callable")
        if not isinstance(timeout_ms, int) or timeout_ms <= 0:
            raise RegistrationError(f"covel.on({event!r}, timeout_ms={timeout_ms!r}): a positive number of milliseconds")
        self.hooks.append(
            HookRegistration(self.plugin_id, event, handler, match, timeout_ms, enforce, len(self.hooks))
        )

    def register_tool(
        self,
        name: str,
        handler: Callable[..., Any],
        *,
        description: str = "",
        parameters: dict[str, Any] | None = None,
        read_only: bool = False,
    ) -> None:
        if any(tool.name == name for tool in self.tools):
            raise RegistrationError(f"covel.register_tool({name!r}): registered twice")
        self.tools.append(
            ToolRegistration(self.plugin_id, name, description, parameters or {"type": "object"}, handler, read_only)
        )

"""What the hooks service knows of a plugin's entry module before and after it loads (wherever its code runs):
the entry as the registry lists it, what loaded, why a load failed, and the cross-check of what register(covel)
registered against what contributes declares.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shared.plugin_code.declarations import Registrations, declaration_problems
from shared.plugin_sdk import PluginRegistrar
from shared.plugin_sdk.http_client import invalid_http_permissions


@dataclass(frozen=True)
class PluginEntry:
    plugin_id: str
    root_dir: Path
    # Relative to root_dir; "" when the plugin has no entry module.
    entry: str
    # (event, enforce) pairs from contributes.hooks.
    declared_hooks: tuple[tuple[str, str], ...]
    source: str
    # The other registrations contributes declares: tool names, RPC actions, service contracts,
    # `<point>/<id>` extensions and form ids.
    declared_tools: tuple[str, ...] = ()
    declared_actions: tuple[str, ...] = ()
    declared_services: tuple[str, ...] = ()
    declared_extensions: tuple[str, ...] = ()
    declared_forms: tuple[str, ...] = ()
    # (where, entry) of permissions.http, root and runtimes (covel.http).
    http_permissions: tuple[tuple[str, Any], ...] = ()

    def declared(self) -> Registrations:
        return Registrations(self.declared_hooks, self.declared_tools, self.declared_actions, self.declared_services,
                             self.declared_extensions, self.declared_forms)

    def declared_registrations(self) -> list[tuple[str, tuple[str, ...]]]:
        """(contributes field, declared names) for the registrations other than hooks."""
        return [
            ("tools", self.declared_tools),
            ("actions", self.declared_actions),
            ("services", self.declared_services),
            ("extensions", self.declared_extensions),
            ("forms", self.declared_forms),
        ]


@dataclass
class LoadedPlugin:
    entry: PluginEntry
    registrar: PluginRegistrar
    # The plugin's @hookimpl objects (covel.register_hookimpls), already turned into registrations
    # (in a sandbox worker: its stand-in there).
    # (a HookspecAdapter, plugin_side/hookspec_adapter.py, or a SandboxedHookspecs, sandboxed_hookspecs.py).
    hookspecs: Any = None


@dataclass
class LoadResult:
    loaded: list[LoadedPlugin] = field(default_factory=list)
    # plugin id -> why it failed to load.
    errors: dict[str, str] = field(default_factory=dict)


def check_declarations(plugin: PluginEntry, registrar: PluginRegistrar) -> str | None:
    """contributes and the entry's registrations must agree both ways: hooks (enforce group
    included), tools, actions, services, extensions and forms."""
    return declaration_problems(plugin.declared(), Registrations.of(registrar))


def _declared_without_entry(plugin: PluginEntry) -> str | None:
    problems = []
    if plugin.declared_hooks:
        events = ", ".join(event for event, _ in plugin.declared_hooks)
        problems.append(f"contributes.hooks declares {events} but the plugin has no entry module")
    for field_name, names in plugin.declared_registrations():
        if names:
            problems.append(f"contributes.{field_name} declares {', '.join(names)} but the plugin has no entry module")
    return "; ".join(problems) or None


def entry_problem(plugin: PluginEntry) -> str | None:
    """Why a plugin cannot load before any of its code runs: no entry but declarations, or bad permissions.http."""
    if not plugin.entry:
        return _declared_without_entry(plugin)
    return invalid_http_permissions(plugin.http_permissions)


def plugin_tools_of(result: LoadResult) -> frozenset[tuple[str, str]]:
    return frozenset((loaded.entry.plugin_id, tool.name) for loaded in result.loaded for tool in loaded.registrar.tools)

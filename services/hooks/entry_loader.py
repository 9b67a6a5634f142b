"""Load plugin entry modules (`server/index.py`) and collect what `register(covel)` registers.

Plugin code is imported by shared/plugin_code (a package namespace per plugin, so an entry
module imports its `lib/` package-relatively, as function handlers and guards do). A plugin that
implements provide_environment has its code wrapped to see each session's environment, in the
process that runs it (environments.py); its provide_lifespan is entered once the whole load was
accepted (lifespans.py, from CatalogueSync.reload).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from services.hooks import environments
from services.hooks.hookspec_adapter import HookspecAdapter, register_hookimpls
from services.hooks.sandboxed_hookspecs import SandboxedHookspecs
from shared.plugin_code import PluginFile, load_module
from shared.plugin_code.declarations import Registrations, declaration_problems
from shared.plugin_sdk import PluginRegistrar
from shared.plugin_sdk.http_client import invalid_http_permissions
from shared.plugin_sdk.registrar import RegistrationError
from shared.settings import DataDirSetting


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
    hookspecs: HookspecAdapter | SandboxedHookspecs | None = None


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


class EntryFailed(Exception):
    """An entry module that failed to load, with the reason as `covel hooks info` shows it."""


def entry_problem(plugin: PluginEntry) -> str | None:
    """Why a plugin cannot load before any of its code runs: no entry but declarations, or bad permissions.http."""
    if not plugin.entry:
        return _declared_without_entry(plugin)
    return invalid_http_permissions(plugin.http_permissions)


def run_register(plugin_id: str, root: Path, entry: str, generation: int | None,
                 http_permissions: tuple[tuple[str, Any], ...] = (), workspaces: Path | None = None,
                 ) -> tuple[PluginRegistrar, HookspecAdapter | None]:
    """Import the entry module and run its register(covel) (in the process that runs the plugin's code).
    `workspaces`: where this process reaches the plugin's session folders (None: it runs no sessions, a CLI)."""
    registrar = PluginRegistrar(plugin_id, http_permissions=http_permissions)
    try:
        # A new catalogue generation imports the plugin afresh (its module state starts over).
        module = load_module(PluginFile(plugin_id, root, entry), generation=generation)
        register = getattr(module, "register", None)
        if not callable(register):
            raise RegistrationError(f"{entry} defines no register(covel) function")
        outcome = register(registrar)
        if inspect.isawaitable(outcome):
            raise RegistrationError(f"{entry}: register(covel) must be a plain function, not async")
        hookspecs = register_hookimpls(registrar)
        if hookspecs is not None:
            environments.attach(registrar, hookspecs.environments, workspaces)
    except Exception as error:  # plugin code: any failure fails that plugin only
        raise EntryFailed(f"{entry} failed to load: {type(error).__name__}: {error}") from error
    return registrar, hookspecs


def load_entries(plugins: list[PluginEntry], generation: int, data_dir: Path | None = None) -> LoadResult:
    """Every plugin's entry module in this process (COVEL_SANDBOX_ENABLED=false; the sandbox: sandboxed_entries.py);
    the plugins' session workspaces below `data_dir` (default COVEL_DATA_DIR)."""
    data_dir = data_dir if data_dir is not None else DataDirSetting().data_dir
    result = LoadResult()
    for plugin in plugins:
        problem = entry_problem(plugin)
        if problem or not plugin.entry:
            if problem:
                result.errors[plugin.plugin_id] = problem
            continue
        try:
            registrar, hookspecs = run_register(plugin.plugin_id, plugin.root_dir, plugin.entry, generation, plugin.http_permissions,
                                                environments.workspace_root(data_dir, plugin.plugin_id))
        except EntryFailed as failed:
            result.errors[plugin.plugin_id] = str(failed)
            continue
        mismatch = check_declarations(plugin, registrar)
        if mismatch:
            result.errors[plugin.plugin_id] = mismatch
            continue
        result.loaded.append(LoadedPlugin(plugin, registrar, hookspecs))
    share_plugin_tools(result)
    return result


def plugin_tools_of(result: LoadResult) -> frozenset[tuple[str, str]]:
    return frozenset((loaded.entry.plugin_id, tool.name) for loaded in result.loaded for tool in loaded.registrar.tools)


def share_plugin_tools(result: LoadResult) -> None:
    """Hookspec replace(result) answers through CallTool for these (services/hooks/hookspec_adapter.py)."""
    plugin_tools = plugin_tools_of(result)
    for loaded in result.loaded:
        if isinstance(loaded.hookspecs, HookspecAdapter):
            loaded.hookspecs.plugin_tools = plugin_tools

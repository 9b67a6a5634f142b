"""Run a plugin's entry module (`server/index.py`) and its `register(covel)`, in the process that runs the plugin's
code (its sandbox worker: operations.py `load`; the hooks service with COVEL_SANDBOX_ENABLED=false:
services/hooks/in_process.py; the CLI's plugin commands).

Plugin code is imported by shared/plugin_code (a package namespace per plugin, so an entry
module imports its `lib/` package-relatively, as function handlers and guards do). A plugin that
implements provide_environment has its code wrapped to see each session's environment, in the
process that runs it (environments.py); its provide_lifespan is entered once the whole load was
accepted (lifespans.py).
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from services.hooks.plugin_side import environments
from services.hooks.plugin_side.hookspec_adapter import HookspecAdapter, register_hookimpls
from shared.plugin_code import PluginFile, load_module
from shared.plugin_sdk import PluginRegistrar
from shared.plugin_sdk.registrar import RegistrationError


class EntryFailed(Exception):
    """An entry module that failed to load, with the reason as `covel hooks info` shows it."""


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

"""Plugin code inside the hooks service (COVEL_SANDBOX_ENABLED=false, for debugging only: the code then reaches
every secret of the service): the plugin side (plugin_side/) runs in this process instead of a worker.

The one host module that imports the plugin side (the import contract `hooks-plugin-side-protected` names it):
with the sandbox on, the host reaches plugin code only through its workers, which serve the operations the
service registers by name (sandboxed_entries.py WORKER_OPERATIONS).
"""

from __future__ import annotations

from pathlib import Path

from services.hooks.common.workspaces import workspace_root
from services.hooks.plugin_entries import (
    LoadedPlugin,
    LoadResult,
    PluginEntry,
    check_declarations,
    entry_problem,
    plugin_tools_of,
)
from services.hooks.plugin_side.entry_loader import EntryFailed, run_register
from services.hooks.plugin_side.hookspec_adapter import HookspecAdapter
from shared.settings import DataDirSetting


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
                                                workspace_root(data_dir, plugin.plugin_id))
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


def share_plugin_tools(result: LoadResult) -> None:
    """Hookspec replace(result) answers through CallTool for these (plugin_side/hookspec_adapter.py)."""
    plugin_tools = plugin_tools_of(result)
    for loaded in result.loaded:
        if isinstance(loaded.hookspecs, HookspecAdapter):
            loaded.hookspecs.plugin_tools = plugin_tools

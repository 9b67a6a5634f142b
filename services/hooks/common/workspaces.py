"""Where a plugin's session workspaces are (provide_environment, plugin_side/environments.py): the host makes
them writable by the plugin's worker, the plugin side creates one folder per session below."""

from __future__ import annotations

from pathlib import Path


def workspace_root(data_dir: Path, plugin_id: str) -> Path:
    """The plugin's workspaces: one folder per session below it."""
    return data_dir / "workspaces" / plugin_id

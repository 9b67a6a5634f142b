"""Importing plugin code (entry modules, function handlers, guards): one loader for every service."""

from shared.plugin_code.loader import PluginFile, load_callable, load_module, loaded_callable

__all__ = ["PluginFile", "load_callable", "load_module", "loaded_callable"]

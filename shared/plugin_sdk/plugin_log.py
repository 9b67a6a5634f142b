"""`covel.log` (entry modules) and `ctx.log` (function handlers): plugin code's log lines.

    covel.log.info("fetched the forecast", city=args["city"])

In a sandbox worker a line goes to the host over the channel, which writes it as a JSON line of
its own log with the plugin id, session and turn (`plugin.log`), a few hundred lines at most
before it drops the rest (and says so once); `print()` goes the same way. With the sandbox off
the lines go to the service's log directly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shared.logs import get_logger

LEVELS = ("debug", "info", "warning", "error")
# (plugin id, level, message, fields) -> None: where lines go in this process (a sandbox worker sets its own).
Sink = Callable[[str, str, str, dict[str, Any]], None]


def _to_service_log(plugin_id: str, level: str, message: str, fields: dict[str, Any]) -> None:
    getattr(get_logger(component="plugin"), level)("plugin.log", plugin_id=plugin_id, stream="log", message=message,
                                                    fields=fields)


_sink: list[Sink] = [_to_service_log]


def set_log_sink(sink: Sink) -> None:
    """Where this process's plugin log lines go from now on (a sandbox worker: its channel)."""
    _sink[0] = sink


class PluginLog:
    """A plugin's logger: `debug`, `info`, `warning`, `error`(message, **fields)."""

    def __init__(self, plugin_id: str) -> None:
        self.plugin_id = plugin_id

    def _line(self, level: str, message: object, fields: dict[str, Any]) -> None:
        _sink[0](self.plugin_id, level, str(message), {str(k): v if isinstance(v, (str, int, float, bool)) or v is None else repr(v)
                                                         for k, v in fields.items()})

    def debug(self, message: object, **fields: Any) -> None:
        self._line("debug", message, fields)

    def info(self, message: object, **fields: Any) -> None:
        self._line("info", message, fields)

    def warning(self, message: object, **fields: Any) -> None:
        self._line("warning", message, fields)

    def error(self, message: object, **fields: Any) -> None:
        self._line("error", message, fields)

    def __repr__(self) -> str:
        return f"PluginLog({self.plugin_id!r})"

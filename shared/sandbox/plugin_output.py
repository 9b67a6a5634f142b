"""The host's side of plugin output: the `log` frames of one plugin's workers (covel.log, ctx.log,
print, anything written to sys.stdout or sys.stderr there; shared/sandbox/worker_output.py),
written to the service's log as `plugin.log` JSON lines with the plugin id, and the session and
turn of the call they belong to (the caller's log context).

A plugin cannot flood the log: COVEL_SANDBOX_LOG_LINES_PER_S with a burst of
COVEL_SANDBOX_LOG_BURST per plugin; past them lines are counted and dropped, with one
`plugin.log_dropped` line when dropping starts and a `plugin.log_resumed` line (how many were
dropped) once lines pass again. A line is cut to COVEL_SANDBOX_LOG_LINE_BYTES. Nor can it forge
a service line: its text and fields are values of the plugin's own line, never keys or lines of
their own (control characters, newlines included, are escaped).
"""

from __future__ import annotations

import contextvars
import itertools
import time
from typing import Any

from shared.logs import get_logger
from shared.sandbox.protocol import Log
from shared.sandbox.settings import SandboxSettings

log = get_logger(component="plugin")
LEVELS = ("debug", "info", "warning", "error")
STREAMS = ("log", "stdout", "stderr")
MAX_FIELDS = 20


def clean(text: str, limit: int) -> str:
    """`text` with control characters escaped, cut to `limit` UTF-8 bytes."""
    # Cut first: a worker may send a frame of megabytes.
    escaped = "".join(ch if ch.isprintable() or ch == "\t" else ch.encode("unicode_escape").decode("ascii") for ch in text[:limit])
    encoded = escaped.encode("utf-8")
    if len(encoded) <= limit:
        return escaped
    return encoded[: limit - 3].decode("utf-8", "ignore") + "..."


class PluginOutput:
    """One plugin's log lines as the host writes them (see the module doc)."""

    def __init__(self, plugin_id: str, settings: SandboxSettings) -> None:
        self.plugin_id = plugin_id
        self._rate = settings.sandbox_log_lines_per_s
        self._burst = float(settings.sandbox_log_burst)
        self._line_bytes = settings.sandbox_log_line_bytes
        self._tokens = self._burst
        self._at = time.monotonic()
        self.dropped = 0
        self._dropping = 0

    def _admit(self) -> bool:
        now = time.monotonic()
        self._tokens = min(self._burst, self._tokens + (now - self._at) * self._rate)
        self._at = now
        if self._tokens >= 1:
            self._tokens -= 1
            return True
        return False

    def write(self, frame: Log, context: contextvars.Context | None) -> None:
        """A `log` frame of a worker, in the log context of the call it belongs to (else the host's own)."""
        if not self._admit():
            self.dropped += 1
            self._dropping += 1
            if self._dropping == 1:
                self._emit(context, "warning", "plugin.log_dropped", why=f"more than {self._rate:g} lines a second "
                           f"(burst {self._burst:g}): the plugin's lines are dropped until it writes fewer")
            return
        if self._dropping:
            self._emit(context, "warning", "plugin.log_resumed", dropped=self._dropping)
            self._dropping = 0
        level, stream, fields = frame.lv, frame.s, frame.f
        extra: dict[str, Any] = {}
        if fields:
            extra["fields"] = {clean(str(key), 64): clean(str(value), self._line_bytes // 4)
                               for key, value in itertools.islice(fields.items(), MAX_FIELDS)}
        self._emit(context, level if level in LEVELS else "info", "plugin.log", stream=stream if stream in STREAMS else "log",
                   message=clean(frame.m, self._line_bytes), **extra)

    def _emit(self, context: contextvars.Context | None, level: str, event: str, **fields: Any) -> None:
        def write() -> None:
            getattr(log, level)(event, plugin_id=self.plugin_id, **fields)

        if context is not None:
            context.run(write)
        else:
            write()

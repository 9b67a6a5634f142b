"""What a sandbox worker inherits and where its output goes.

Before isolation (`inherit_nothing`): stdin, stdout and stderr on /dev/null (never the service's
log file), and every other descriptor closed but the channel. Once the channel is up
(`send_output_to_host`): covel.log / ctx.log lines, `print()` and anything else written to
sys.stdout or sys.stderr go to the host as `log` frames ({of, lv, m, s: log | stdout | stderr,
f}), which writes them to its own log marked as the plugin's, rate- and size-limited
(shared/sandbox/plugin_output.py); covel.http / ctx.http requests go to the host as `sandbox.http`
calls (shared/sandbox/http_channel.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import sys
import threading
from typing import TYPE_CHECKING, Any

from shared.plugin_sdk import http_client, plugin_log
from shared.plugin_threads import thread_owner
from shared.sandbox.http_channel import ChannelTransport
from shared.sandbox.protocol import Log

if TYPE_CHECKING:
    from shared.sandbox.worker_server import WorkerServer

# A line longer than this is sent in pieces (the host cuts lines further: COVEL_SANDBOX_LOG_LINE_BYTES).
MAX_SENT_LINE = 16 * 1024


def inherit_nothing(channel_fd: int) -> None:
    """stdio on /dev/null, every other inherited descriptor closed but `channel_fd`."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        if fd != null:
            os.dup2(null, fd)
    if null > 2:
        os.close(null)
    for fd in sorted(int(name) for name in os.listdir("/proc/self/fd") if name.isdigit()):
        if fd > 2 and fd != channel_fd:
            with contextlib.suppress(OSError):  # the descriptor listdir used, closed already
                os.close(fd)


class _Sender:
    """Sends `log` frames from the worker's loop or from any thread."""

    def __init__(self, server: WorkerServer, loop: asyncio.AbstractEventLoop) -> None:
        self._server = server
        self._loop = loop
        self._loop_thread = threading.get_ident()

    def line(self, level: str, message: str, stream: str, fields: dict[str, Any] | None = None) -> None:
        frame = Log(thread_owner.get() or 0, level, message[:MAX_SENT_LINE], stream, fields or {})
        if threading.get_ident() == self._loop_thread:
            self._send(frame)
        else:
            with contextlib.suppress(RuntimeError):  # the loop is closed: the worker is ending
                self._loop.call_soon_threadsafe(self._send, frame)

    def _send(self, frame: Log) -> None:
        try:
            try:
                self._server.send(frame)
            except (TypeError, ValueError):  # fields that are not JSON
                self._server.send(Log(frame.of, frame.lv, frame.m, frame.s))
        except Exception:  # the channel is closing: the line is lost with the worker
            pass


class LineWriter(io.TextIOBase):
    """sys.stdout / sys.stderr of plugin code: each line becomes a log line of the plugin."""

    def __init__(self, sender: _Sender, stream: str) -> None:
        self._sender = sender
        self._stream = stream
        self._partial = ""
        self._lock = threading.Lock()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        with self._lock:
            self._partial += text
            *lines, self._partial = self._partial.split("\n")
            if len(self._partial) > MAX_SENT_LINE:
                lines.append(self._partial)
                self._partial = ""
        for line in lines:
            self._sender.line("warning" if self._stream == "stderr" else "info", line, self._stream)
        return len(text)

    def flush(self) -> None:
        pass


def send_output_to_host(server: WorkerServer) -> None:
    """From now on this worker's plugin output and HTTP requests go to the host (see the module doc)."""
    sender = _Sender(server, asyncio.get_running_loop())
    sys.stdout = LineWriter(sender, "stdout")
    sys.stderr = LineWriter(sender, "stderr")
    plugin_log.set_log_sink(lambda plugin_id, level, message, fields: sender.line(level, message, "log", fields))

    async def send_request(request: dict[str, Any]) -> dict[str, Any]:
        return await server.host_any(thread_owner.get() or 0, "sandbox.http", request)

    http_client.set_default_transport(lambda: ChannelTransport(send_request))

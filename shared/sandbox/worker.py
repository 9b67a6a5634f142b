"""`python -m shared.sandbox.worker <config>`: one plugin's code in a process of its own.

The worker imports the operations its service registered (shared/sandbox/operations.py), isolates
itself (shared/sandbox/isolation.py) before it imports anything of the plugin, then serves the host's
calls over the channel (worker_server.py, shared/sandbox/channel.py), several at once: `async def`
code on its event loop, any other in its plugin threads. What plugin code gets as ctx is rebuilt
here from plain data; ctx capabilities that need the kernel (plugin data, world reads, tools, the
gateway, ...) are calls back to the host. The plugin's module
state lives here, so it starts over when the worker is replaced.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import sys
import traceback
from typing import Any

from shared.logs import configure_logging, get_logger
from shared.sandbox.channel import ChannelClosed
from shared.sandbox.isolation import Isolation, IsolationConfig, enter
from shared.sandbox.operations import OPERATIONS, load_operations, operation_modules
from shared.sandbox.protocol import PROTOCOL_VERSION, Ready, Retire
from shared.sandbox.worker_output import inherit_nothing, send_output_to_host
from shared.sandbox.worker_server import WorkerServer

log = get_logger(component="sandbox-worker")


def _retire_on_cpu_limit(server: WorkerServer) -> None:
    """Past the soft CPU limit the worker asks to be replaced (the hard limit kills it)."""
    with contextlib.suppress(ValueError, RuntimeError):
        asyncio.get_running_loop().add_signal_handler(
            signal.SIGXCPU, lambda: server.send(Retire("its CPU time limit")))


async def _main(config: dict[str, Any], isolation: Isolation) -> None:
    sock = socket.socket(fileno=int(config["channel_fd"]))
    reader, writer = await asyncio.open_unix_connection(sock=sock)
    server = WorkerServer(str(config["plugin_id"]), isolation, writer, OPERATIONS)
    # Output (print, covel.log, this process's own log lines) and HTTP go to the host from here on.
    send_output_to_host(server)
    configure_logging(str(config.get("service") or "sandbox"), str(config.get("log_level") or "info"), "json")
    import structlog

    structlog.contextvars.bind_contextvars(sandbox_plugin_id=config["plugin_id"])
    _retire_on_cpu_limit(server)
    server.send(Ready(PROTOCOL_VERSION, isolation.report))
    with contextlib.suppress(ChannelClosed):
        await server.serve(reader)


def run(config: dict[str, Any]) -> None:
    """Isolate this process, then serve the host until the channel closes (never returns)."""
    # The services' operations (preloaded by the zygote; imported here when the worker started on its own).
    load_operations(config.get("operations") or operation_modules())
    # Nothing of the service's: not its log file (stdout, stderr), nor any descriptor but the channel.
    inherit_nothing(int(config["channel_fd"]))
    isolation = enter(IsolationConfig(**config["isolation"]))
    try:
        asyncio.run(_main(config, isolation))
    except Exception:
        traceback.print_exc()  # to the host while the channel is up, else to /dev/null
        os._exit(70)
    # Plugin threads may still run: they end with the process.
    os._exit(0)


def main() -> None:
    """A worker started on its own (shared/sandbox/zygote.py forks them otherwise)."""
    run(json.loads(sys.argv[1]))


if __name__ == "__main__":
    main()

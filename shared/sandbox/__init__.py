"""Plugin code in worker processes apart from the kernel's services (docs/security.md, "Plugin sandbox").

host.py: a service's pool of warm workers, one per plugin (worker_handle.py: one worker as the host
sees it; zygote_client.py: the fork server that starts them, zygote.py); worker.py: the worker's entry
point; worker_server.py: its end of the channel; operations.py: what a worker serves, registered by the
services (register_operations); isolation.py: what a worker gives up before plugin code runs (its network
among them); worker_output.py: its stdio, output and HTTP sent to the host; http_gate.py and
plugin_output.py: the host's checks of that HTTP and those log lines; protocol.py: the frames between them, as
types (versioned, validated on decode); channel.py: their bytes.
"""

from shared.sandbox.errors import RemoteError, WorkerGone
from shared.sandbox.host import PluginWorkers, SandboxPool, Worker
from shared.sandbox.settings import SandboxSettings


def is_sandboxed(function: object) -> bool:
    """A host-side stand-in for plugin code that runs in a worker (an object or its bound method)."""
    return bool(getattr(getattr(function, "__self__", function), "sandboxed", False))


__all__ = ["PluginWorkers", "RemoteError", "SandboxPool", "SandboxSettings", "Worker", "WorkerGone", "is_sandboxed"]

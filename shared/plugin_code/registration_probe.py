"""`python -m shared.plugin_code.registration_probe`: run plugins' register(covel) against a
recording registrar and print what each registers, so a process that must not import plugin
code (the registry) can check it against contributes.

stdin: a JSON list of {pluginId, root, entry}. stdout: {ready: true} once started and isolated, then one
JSON line per plugin, in order, as soon as it is done: {pluginId, registrations, hookimpls} or {pluginId, error}. The caller bounds
the time of each and kills the process on overrun (registry: services/registry/entry_registrations.py).
With the sandbox on, the probe isolates itself first, as a sandbox worker does (argv[1]).
"""

from __future__ import annotations

import inspect
import json
import resource
import sys
from pathlib import Path
from typing import Any

from shared.plugin_code.declarations import Registrations
from shared.plugin_code.loader import PluginFile, load_module
from shared.plugin_sdk import PluginRegistrar
from shared.sandbox.isolation import IsolationConfig, enter


def record(plugin_id: str, root: Path, entry: str) -> dict[str, Any]:
    registrar = PluginRegistrar(plugin_id)
    try:
        module = load_module(PluginFile(plugin_id, root, entry))
        register = getattr(module, "register", None)
        if not callable(register):
            return {"pluginId": plugin_id, "error": f"{entry} defines no register(covel) function"}
        if inspect.isawaitable(register(registrar)):
            return {"pluginId": plugin_id, "error": f"{entry}: register(covel) must be a plain function, not async"}
    except Exception as error:  # plugin code: any failure is that plugin's answer
        return {"pluginId": plugin_id, "error": f"{entry} failed to load: {type(error).__name__}: {error}"}
    return {"pluginId": plugin_id, "registrations": Registrations.of(registrar).to_json(),
            "hookimpls": bool(registrar.hookimpl_objects)}


# Address space of the probe: plugin code that allocates without bound fails here, not the host.
MEMORY_LIMIT_BYTES = 2 * 1024**3


def main() -> None:
    # argv[1], when given: the sandbox's isolation (shared/sandbox/isolation.py), entered before any plugin code.
    isolation = enter(IsolationConfig.from_arg(sys.argv[1])) if len(sys.argv) > 1 else None
    if isolation is None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))
    out = sys.stdout
    # Started and isolated: the caller's time for each register(covel) runs from here.
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    requests = json.load(sys.stdin)
    # Plugin code printing to stdout must not garble the answers.
    sys.stdout = sys.stderr
    for request in requests:
        root = isolation.path_of(request["root"]) if isolation is not None else request["root"]
        answer = record(request["pluginId"], Path(root), request["entry"])
        out.write(json.dumps(answer) + "\n")
        out.flush()


if __name__ == "__main__":
    main()

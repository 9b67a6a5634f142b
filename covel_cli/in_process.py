"""The five services inside this one process (benchmarks): the cost of the split, measured.

Each service is started exactly as its `python -m services.<name>` does (its settings model
from the environment, then its server's `start()`), but all in the calling asyncio loop. They
remain five grpc.aio servers talking gRPC to each other: every call is still serialised to
protobuf and crosses a socket (a unix socket by default, or loopback TCP). What goes away
is the process boundary: one interpreter, one event loop, one core, no inter-process
scheduling. grpcio's Python API has no in-memory transport, so this is as close to
"in-process channels" as the real servers get without replacing them.

The services read their settings from the environment, so `start()` sets the group's
variables in this process' `os.environ`: use it in a process of its own (a benchmark). Each
service still gets a certificate of its own (given to its settings, as `covel up` gives it to
its process), so every call between them is mTLS and checked against the caller policy.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from covel_cli.launcher import SERVICES, dev_pki
from shared.grpc_server import RunningServer
from shared.logs import configure_logging

SETTINGS_CLASSES = {
    "store": "StoreSettings",
    "registry": "RegistrySettings",
    "gateway": "GatewaySettings",
    "hooks": "HooksSettings",
    "scheduler": "SchedulerSettings",
}


def unix_socket_addrs(folder: Path) -> dict[str, str]:
    """One unix socket per service in `folder` (keep it short: socket paths are limited to ~100 bytes)."""
    return {name: f"unix:{folder / f'{name}.sock'}" for name in SERVICES}


@dataclass
class InProcessGroup:
    """Like launcher.ServiceGroup (same addrs/data_dir/extra_env), but the servers run in this loop."""

    addrs: dict[str, str]
    data_dir: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    running: dict[str, RunningServer] = field(default_factory=dict)
    grace_s: float = 5.0

    def env(self) -> dict[str, str]:
        env = {f"COVEL_{name.upper()}_ADDR": addr for name, addr in self.addrs.items()}
        env["COVEL_DATA_DIR"] = str(self.data_dir)
        env.update(self.extra_env)
        return env

    async def start(self) -> None:
        os.environ.update(self.env())
        self.data_dir.mkdir(parents=True, exist_ok=True)
        # One structlog configuration for the whole process (each service would set its own).
        configure_logging("in-process", os.environ.get("COVEL_LOG_LEVEL", "info"), os.environ.get("COVEL_LOG_FORMAT", "json"))
        try:
            # Same order as the launcher: hooks loads entry modules from the registry's catalogue.
            pki = dev_pki(self.data_dir).ensure()
            for name in SERVICES:
                settings_class = getattr(importlib.import_module(f"services.{name}.settings"), SETTINGS_CLASSES[name])
                server = importlib.import_module(f"services.{name}.server")
                files = pki.files(name)
                # The scheduler's client API in plaintext, as under `covel up`.
                identity = {"tls_cert_file": files.cert, "tls_key_file": files.key, "tls_ca_file": files.ca,
                            "tls_listen_plaintext": name == "scheduler"}
                self.running[name] = await server.start(settings_class(**identity))
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> None:
        for name in reversed(SERVICES):
            running = self.running.pop(name, None)
            if running is not None:
                await running.stop(self.grace_s)
        # The store closes its database once its server has terminated.
        await importlib.import_module("services.store.server").wait_closed()

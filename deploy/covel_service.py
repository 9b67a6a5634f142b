#!/usr/bin/env python3
"""`covel-service`: the container's entry point (deploy/Dockerfile installs it on PATH).

    covel-service <registry|scheduler|hooks|gateway|store|web>   run that service
    covel-service store-migrate                              bring the store's database to its schema, exit
    covel-service probe [<service>]                          exit 0 when it answers SERVING

A service binds its own `COVEL_<SERVICE>_ADDR` and dials its peers at theirs, so one
ConfigMap can name every peer by its cluster address (`covel-store:50154`): in the
container the service listens on all interfaces (`COVEL_LISTEN_HOST`, default 0.0.0.0) at
the port of its own address. The probe asks the standard gRPC health service at that port
on loopback, with the container's TLS settings (or in plaintext at COVEL_HEALTH_PORT when
set); with no service named it probes the one PID 1 runs, which is what Docker's HEALTHCHECK
needs.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from covel_cli.launcher import SERVICES as GRPC_SERVICES
from covel_cli.launcher import WEB

# The five gRPC services, and the web front (an HTTP server in front of the scheduler).
SERVICES = (*GRPC_SERVICES, WEB)
from shared.settings import PeerAddresses

MIGRATE = "store-migrate"
USAGE = f"usage: covel-service <{'|'.join(SERVICES)}> | covel-service {MIGRATE} | covel-service probe [<service>]"


def listen_addr(configured: str, host: str) -> str:
    """`host` with the port of `configured` ("covel-store:50154" -> "0.0.0.0:50154")."""
    port = configured.rpartition(":")[2]
    if not port.isdigit():
        raise ValueError(f"{configured!r} has no port; set it as host:port")
    return f"{host}:{port}"


def service_of_pid1(cmdline: Path = Path("/proc/1/cmdline")) -> str | None:
    """The service PID 1 runs (`python -m services.<name>`, after covel-service exec'd it)."""
    try:
        argv = cmdline.read_bytes().split(b"\0")
    except OSError:
        return None
    for arg in argv:
        name = arg.decode(errors="replace").removeprefix("services.")
        if arg.startswith(b"services.") and name in SERVICES:
            return name
    return None


def check_name(name: str) -> str:
    if name not in SERVICES:
        raise SystemExit(f"covel-service: unknown service {name!r}; one of {', '.join(SERVICES)}\n{USAGE}")
    return name


def run(service: str) -> None:
    own_var = f"COVEL_{service.upper()}_ADDR"
    configured = os.environ.get(own_var, "127.0.0.1:8080") if service == WEB else PeerAddresses().addr_of(service)
    try:
        os.environ[own_var] = listen_addr(configured, os.environ.get("COVEL_LISTEN_HOST", "0.0.0.0"))
    except ValueError as error:
        raise SystemExit(f"covel-service: {own_var}: {error}") from None
    # exec: the service becomes this process, so it receives SIGTERM itself and drains.
    os.execvp(sys.executable, [sys.executable, "-m", f"services.{service}"])


def probe_web() -> int:
    """The web front answers /healthz on its own port."""
    import urllib.request

    from services.web.settings import WebSettings

    url = f"http://{listen_addr(WebSettings().web_addr, '127.0.0.1')}/healthz"
    try:
        with urllib.request.urlopen(url, timeout=float(os.environ.get("COVEL_PROBE_TIMEOUT_S", "3"))) as reply:
            ok = reply.status == 200
    except OSError as error:
        print(f"web {url} UNREACHABLE ({error})")
        return 1
    print(f"web {url} {'SERVING' if ok else 'NOT_SERVING'}")
    return 0 if ok else 1


def probe(service: str) -> int:
    if service == WEB:
        return probe_web()
    from shared.grpc_client import check_health
    from shared.settings import SecuritySettings

    security = SecuritySettings()
    health_port = security.health_port_of(service)
    if health_port is not None:
        # The plaintext health-only port (COVEL_HEALTH_PORT): no certificate needed.
        addr = f"127.0.0.1:{health_port}"
        security = SecuritySettings(tls_cert_file=None, tls_key_file=None, tls_ca_file=None)
    else:
        addr = listen_addr(PeerAddresses().addr_of(service), "127.0.0.1")
    timeout_s = float(os.environ.get("COVEL_PROBE_TIMEOUT_S", "3"))
    status = asyncio.run(check_health(addr, timeout_s=timeout_s, security=security))
    print(f"{service} {addr} {status}")
    return 0 if status == "SERVING" else 1


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stderr)
        return 2
    if argv[0] == MIGRATE:
        # The store's init container (deploy/k8s/base/store.yaml): the store itself only checks.
        os.execvp(sys.executable, [sys.executable, "-m", "services.store.migrate"])
    if argv[0] == "probe":
        name = argv[1] if len(argv) > 1 else service_of_pid1()
        if name is None:
            print("covel-service probe: name the service; PID 1 runs none", file=sys.stderr)
            return 2
        return probe(check_name(name))
    run(check_name(argv[0]))
    return 0  # not reached: run() replaces the process


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""One line for a command whose call a service refused or could not take (`covel operator …`, `covel hooks
info`, `covel health`): what the service answered, or, when this command's certificates do not fit the running
services' (another data dir, another stack's COVEL_TLS_*), that, with what to do."""

from __future__ import annotations

from pathlib import Path

import grpc

from covel_cli.launcher import client_security, dev_pki
from shared.grpc_client import health_of
from shared.settings import SecuritySettings

# A TLS handshake that failed (the client or the server did not trust the other's certificate).
HANDSHAKE_FAILED = ("CERTIFICATE_VERIFY_FAILED", "handshake failed", "SSL_ERROR")


def _presented(data_dir: Path, security: SecuritySettings) -> str | None:
    """What this command shows the services: its COVEL_TLS_* files, its data dir's certificates, or None."""
    if security.tls_cert_file is not None or security.tls_ca_file is not None:
        return f"the certificates COVEL_TLS_* name ({security.tls_cert_file or security.tls_ca_file})"
    if dev_pki(data_dir).files("operator").cert.exists():
        return f"the certificates of the data dir {data_dir} (its pki/)"
    return None


def certificate_mismatch(name: str, addr: str, error: grpc.aio.AioRpcError, data_dir: Path,
                         security: SecuritySettings | None = None) -> str | None:
    """One line when `error` is a connection that failed on certificates; None for any other error."""
    details = (error.details() or "").lower()
    if error.code() != grpc.StatusCode.UNAVAILABLE:
        return None
    presented = _presented(data_dir, security if security is not None else SecuritySettings())
    handshake = any(mark.lower() in details for mark in HANDSHAKE_FAILED)
    # Plaintext to a service that speaks TLS: it closes the socket.
    if not handshake and not (presented is None and "socket closed" in details):
        return None
    shown = presented or f"no certificate: the data dir {data_dir} has none"
    return (f"the {name} service at {addr} refused this command's TLS connection ({shown}): run the command with the "
            "data dir of the `covel up` that started it (COVEL_DATA_DIR), or with that stack's COVEL_TLS_* settings")


def refusal(command: str, name: str, addr: str, error: grpc.aio.AioRpcError, data_dir: Path) -> str:
    mismatch = certificate_mismatch(name, addr, error, data_dir)
    if mismatch is not None:
        return f"covel {command}: {mismatch}"
    return f"covel {command}: the {name} service at {addr} answered {error.code().name}: {error.details()}"


async def service_health(name: str, addr: str, data_dir: Path, timeout_s: float = 2.0) -> tuple[str, str | None]:
    """Service `name`'s health status name ("UNREACHABLE" when it cannot be asked) and, when certificates were
    why, the line that says so."""
    status, error = await health_of(addr, timeout_s=timeout_s, security=client_security(name, data_dir))
    return status, certificate_mismatch(name, addr, error, data_dir) if error is not None else None

"""TLS credentials from COVEL_TLS_* settings: server credentials, channel credentials.

One certificate per process serves both ends: a server presents it to its callers and, as
a client, to the services it calls; it names the process's identity
(shared/security/service_identity.py), so each service has its own. With a CA configured,
servers require client certificates signed by it (mTLS) and clients verify servers against it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import grpc

from shared.settings import SecuritySettings


class TlsConfigError(ValueError):
    """TLS settings that cannot work (a missing file, a certificate without its key)."""


@dataclass(frozen=True)
class TlsMaterial:
    cert_chain: bytes | None
    private_key: bytes | None
    root_ca: bytes | None
    require_client_cert: bool
    server_name: str
    listen_plaintext: bool = False

    @property
    def has_identity(self) -> bool:
        return self.cert_chain is not None


def _read(path: Path | None, variable: str) -> bytes | None:
    if path is None:
        return None
    try:
        data = path.read_bytes()
    except OSError as error:
        raise TlsConfigError(f"{variable}={path}: cannot read it ({error.strerror or error})") from None
    if b"-----BEGIN" not in data:
        raise TlsConfigError(f"{variable}={path}: not a PEM file (no -----BEGIN line)")
    return data


def load_tls(settings: SecuritySettings) -> TlsMaterial | None:
    """The configured TLS material, or None when TLS is off (no certificate and no CA)."""
    if (settings.tls_cert_file is None) != (settings.tls_key_file is None):
        raise TlsConfigError("set COVEL_TLS_CERT_FILE and COVEL_TLS_KEY_FILE together (a certificate needs its private key)")
    if settings.tls_cert_file is None and settings.tls_ca_file is None:
        return None
    return TlsMaterial(
        cert_chain=_read(settings.tls_cert_file, "COVEL_TLS_CERT_FILE"),
        private_key=_read(settings.tls_key_file, "COVEL_TLS_KEY_FILE"),
        root_ca=_read(settings.tls_ca_file, "COVEL_TLS_CA_FILE"),
        require_client_cert=settings.tls_require_client_cert,
        server_name=settings.tls_server_name,
        listen_plaintext=settings.tls_listen_plaintext,
    )


def listening_credentials(material: TlsMaterial | None) -> grpc.ServerCredentials | None:
    """What a server listens with: None (plaintext) without TLS settings or with COVEL_TLS_LISTEN_PLAINTEXT."""
    if material is None or material.listen_plaintext:
        return None
    return server_credentials(material)


def server_credentials(material: TlsMaterial) -> grpc.ServerCredentials:
    if not material.has_identity:
        raise TlsConfigError(
            "COVEL_TLS_CA_FILE is set but a server needs its own certificate too: set COVEL_TLS_CERT_FILE and COVEL_TLS_KEY_FILE"
        )
    require = material.root_ca is not None and material.require_client_cert
    return grpc.ssl_server_credentials(
        [(material.private_key, material.cert_chain)],
        root_certificates=material.root_ca,
        require_client_auth=require,
    )


def channel_credentials(material: TlsMaterial) -> grpc.ChannelCredentials:
    # Without a CA the system's trust store verifies the server.
    return grpc.ssl_channel_credentials(
        root_certificates=material.root_ca, private_key=material.private_key, certificate_chain=material.cert_chain
    )


def channel_options(material: TlsMaterial) -> list[tuple[str, str]]:
    return [("grpc.ssl_target_name_override", material.server_name)] if material.server_name else []

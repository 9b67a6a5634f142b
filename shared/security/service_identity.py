"""Service identity (docs/security.md, "Service identity"): who a caller is, from its client certificate,
and the server side of the policy table (shared/security/policy.py).

Each service has a certificate of its own, issued by the deployment's CA, whose subject alternative
name is the URI `spiffe://covel.local/<service>` (the CLI's operator commands: `.../operator`).
mTLS proves the caller holds the key of a certificate the CA signed; the URI says which one it is.
`DevPki` issues such certificates: `covel up` makes a CA and one certificate per identity in its
data dir, `covel certs` for a cluster.
"""

from __future__ import annotations

import datetime
import functools
import inspect
import ipaddress
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from shared.errors import abort
from shared.security.policy import CLIENT, IDENTITIES, is_open, rule_of
from shared.settings import SecuritySettings

TRUST_DOMAIN = "covel.local"
SPIFFE_PREFIX = f"spiffe://{TRUST_DOMAIN}/"
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")


def spiffe_id(identity: str) -> str:
    return SPIFFE_PREFIX + identity


@functools.lru_cache(maxsize=64)
def identity_of_certificate(pem: bytes) -> str | None:
    """The covel identity a certificate names (its one `spiffe://covel.local/<name>` URI), else None."""
    try:
        names = x509.load_pem_x509_certificate(pem).extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (ValueError, x509.ExtensionNotFound):
        return None
    ours = [uri[len(SPIFFE_PREFIX):] for uri in names.get_values_for_type(x509.UniformResourceIdentifier) if uri.startswith(SPIFFE_PREFIX)]
    return ours[0] if len(ours) == 1 and ours[0] in IDENTITIES else None


def peer_certificate(context: grpc.aio.ServicerContext) -> bytes | None:
    """The client certificate gRPC verified for this call (None: plaintext, or TLS without one)."""
    pems = context.auth_context().get("x509_pem_cert") or []
    return pems[0] if pems else None


def caller_identity(context: grpc.aio.ServicerContext) -> str | None:
    """The covel identity of this call's client certificate (None without one: a server run without TLS)."""
    certificate = peer_certificate(context)
    return identity_of_certificate(certificate) if certificate is not None else None


def _needs(callers: frozenset[str]) -> str:
    return " or ".join(sorted(callers))


def refusal(path: str, certificate: bytes | None) -> tuple[grpc.StatusCode, str] | None:
    """Why the caller of `path` (with its client certificate) may not call it; None: it may."""
    method = path.lstrip("/")
    if is_open(path):
        return None
    rule = rule_of(path)
    if rule is None:
        return grpc.StatusCode.PERMISSION_DENIED, f"{method} is in no row of the service policy (shared/security/policy.py): nobody may call it"
    if CLIENT in rule.callers:
        return None
    if certificate is None:
        return grpc.StatusCode.UNAUTHENTICATED, (
            f"{method} needs a client certificate of the service CA naming {_needs(rule.callers)} "
            f"({SPIFFE_PREFIX}<name>); this call came without one (set COVEL_TLS_CERT_FILE, COVEL_TLS_KEY_FILE, COVEL_TLS_CA_FILE)")
    identity = identity_of_certificate(certificate)
    if identity is None:
        return grpc.StatusCode.UNAUTHENTICATED, (
            f"{method}: the caller's certificate names no covel identity (one URI SAN {SPIFFE_PREFIX}<name>, "
            f"<name> one of {', '.join(IDENTITIES)}); issue one with `covel certs`")
    if identity not in rule.callers:
        return grpc.StatusCode.PERMISSION_DENIED, (
            f"{method} may be called by {_needs(rule.callers)} only ({rule.why}); the caller is {identity}")
    return None


def _wrapped(handler: grpc.RpcMethodHandler, path: str) -> grpc.RpcMethodHandler:
    """The same kind of handler, run once `refusal` lets its caller in (aio interceptors get no context)."""

    async def admitted(context: grpc.aio.ServicerContext) -> bool:
        refused = refusal(path, peer_certificate(context))
        if refused is not None:
            await abort(context, *refused)
        return refused is None

    async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
        if await admitted(context):
            return await behaviour(request, context)

    async def streaming(request: Any, context: grpc.aio.ServicerContext) -> Any:
        if not await admitted(context):
            return
        result = behaviour(request, context)
        if inspect.isasyncgen(result):
            async for item in result:
                yield item
        else:  # a handler that writes with context.write
            await result

    behaviour: Callable[..., Any]
    kinds = {
        (False, False): ("unary_unary", grpc.unary_unary_rpc_method_handler, unary),
        (False, True): ("unary_stream", grpc.unary_stream_rpc_method_handler, streaming),
        (True, False): ("stream_unary", grpc.stream_unary_rpc_method_handler, unary),
        (True, True): ("stream_stream", grpc.stream_stream_rpc_method_handler, streaming),
    }
    attribute, make, wrapper = kinds[(bool(handler.request_streaming), bool(handler.response_streaming))]
    behaviour = getattr(handler, attribute)
    return make(wrapper, request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer)


class CallerPolicyInterceptor(grpc.aio.ServerInterceptor):
    """Every method runs only for the callers its row of POLICY names; health and reflection are open."""

    async def intercept_service(self, continuation: Any, handler_call_details: grpc.HandlerCallDetails) -> Any:
        handler = await continuation(handler_call_details)
        path = handler_call_details.method
        if handler is None or is_open(path):
            return handler
        return _wrapped(handler, path)


# -- certificates ---------------------------------------------------------------------------------

CA_DAYS = 3650
LEAF_DAYS = 365
# A certificate that expires sooner is issued again (covel up reuses its PKI across runs).
RENEW_BEFORE = datetime.timedelta(days=7)


@dataclass(frozen=True)
class IssuedFiles:
    cert: Path
    key: Path
    ca: Path

    def security(self, **extra: Any) -> SecuritySettings:
        """Settings that present this certificate and trust the CA."""
        return SecuritySettings(tls_cert_file=self.cert, tls_key_file=self.key, tls_ca_file=self.ca, **extra)

    def env(self) -> dict[str, str]:
        return {"COVEL_TLS_CERT_FILE": str(self.cert), "COVEL_TLS_KEY_FILE": str(self.key), "COVEL_TLS_CA_FILE": str(self.ca)}


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "covel"), x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write_private(path: Path, data: bytes) -> None:
    """Written readable by its owner only: a key file."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as file:
        file.write(data)


def _alt_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _fresh(cert: x509.Certificate, now: datetime.datetime) -> bool:
    return cert.not_valid_after_utc - now > RENEW_BEFORE


class DevPki:
    """A CA and one certificate per identity in `folder` (ca.pem, ca.key, <identity>.pem, <identity>.key).

    `ensure` creates what is missing and issues again what expires within RENEW_BEFORE or was
    signed by another CA, so a data dir keeps its PKI across runs."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.ca_cert = folder / "ca.pem"
        self.ca_key = folder / "ca.key"

    def files(self, identity: str) -> IssuedFiles:
        return IssuedFiles(self.folder / f"{identity}.pem", self.folder / f"{identity}.key", self.ca_cert)

    def ensure(self, identities: Sequence[str] = IDENTITIES, hosts: Sequence[str] = LOCAL_HOSTS,
               hosts_of: Callable[[str], Sequence[str]] | None = None) -> DevPki:
        """Every identity's certificate, for `hosts` (or `hosts_of(identity)`) as server names."""
        self.folder.mkdir(parents=True, exist_ok=True)
        os.chmod(self.folder, 0o700)
        now = datetime.datetime.now(datetime.UTC)
        ca_cert, ca_key = self._ca(now)
        for identity in identities:
            names = list(hosts_of(identity) if hosts_of is not None else hosts)
            if not self._current(identity, ca_cert, names, now):
                self._issue(identity, names, ca_cert, ca_key, now)
        return self

    def _ca(self, now: datetime.datetime) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
        if self.ca_cert.exists() and self.ca_key.exists():
            cert = x509.load_pem_x509_certificate(self.ca_cert.read_bytes())
            key = serialization.load_pem_private_key(self.ca_key.read_bytes(), password=None)
            if isinstance(key, ec.EllipticCurvePrivateKey) and _fresh(cert, now):
                return cert, key
        key = ec.generate_private_key(ec.SECP256R1())
        name = _name(f"covel CA {now:%Y-%m-%d %H:%M:%S}")
        cert = (
            x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=CA_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256())
        )
        _write_private(self.ca_key, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                      serialization.NoEncryption()))
        self.ca_cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return cert, key

    def _current(self, identity: str, ca_cert: x509.Certificate, hosts: list[str], now: datetime.datetime) -> bool:
        files = self.files(identity)
        if not (files.cert.exists() and files.key.exists()):
            return False
        cert = x509.load_pem_x509_certificate(files.cert.read_bytes())
        try:
            cert.verify_directly_issued_by(ca_cert)
        except (ValueError, TypeError, InvalidSignature):  # another CA's, or not a CA's certificate at all
            return False
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        wanted = {spiffe_id(identity), *hosts}
        present = {str(getattr(name, "value", name)) for name in names}
        return _fresh(cert, now) and wanted == present

    def _issue(self, identity: str, hosts: list[str], ca_cert: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey,
               now: datetime.datetime) -> None:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            x509.CertificateBuilder().subject_name(_name(identity)).issuer_name(ca_cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=LEAF_DAYS))
            .add_extension(x509.SubjectAlternativeName([x509.UniformResourceIdentifier(spiffe_id(identity)),
                                                        *(_alt_name(host) for host in hosts)]), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(ca_key, hashes.SHA256())
        )
        files = self.files(identity)
        _write_private(files.key, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                    serialization.NoEncryption()))
        files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))

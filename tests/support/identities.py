"""Service certificates for tests that start services in this process (shared/security/service_identity.py).

One dev PKI per test run, made on first use: `service_tls("store")` gives a server its own
certificate (settings keywords), `channel_as(addr, "scheduler")` calls it as a given identity.
Tests that start the services through the launcher (tests/e2e) get the launcher's own PKI.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path
from typing import Any

import grpc

from shared.grpc_client import open_channel
from shared.security.policy import rule_of
from shared.security.service_identity import DevPki, IssuedFiles
from shared.settings import SecuritySettings


@functools.cache
def run_pki() -> DevPki:
    folder = Path(tempfile.mkdtemp(prefix="covel-pki-"))
    atexit.register(shutil.rmtree, folder, True)
    return DevPki(folder).ensure()


def issued(identity: str) -> IssuedFiles:
    return run_pki().files(identity)


def service_tls(identity: str) -> dict[str, Any]:
    """Settings keywords that make a service serve with `identity`'s certificate (and dial with it)."""
    files = issued(identity)
    return {"tls_cert_file": files.cert, "tls_key_file": files.key, "tls_ca_file": files.ca}


def security_as(identity: str) -> SecuritySettings:
    return issued(identity).security()


def channel_as(addr: str, identity: str) -> grpc.aio.Channel:
    """A service's kind of channel to `addr` (deadlines, retries: shared/grpc_client.py) presenting `identity`'s certificate."""
    return open_channel(addr, security=security_as(identity))


def bare_channel_as(addr: str, identity: str, **options: Any) -> grpc.aio.Channel:
    """What grpc.aio.insecure_channel is without TLS: no deadlines or retries, `identity`'s certificate."""
    files = issued(identity)
    credentials = grpc.ssl_channel_credentials(files.ca.read_bytes(), files.key.read_bytes(), files.cert.read_bytes())
    return grpc.aio.secure_channel(addr, credentials, **options)


# Which identity a routed stub calls a method as, of those its row admits: the service that calls it in
# a running deployment first, the operator last.
CALLER_PREFERENCE = ("scheduler", "hooks", "operator")


class PolicyRoutedStub:
    """A stub whose every method is called as an identity the policy admits for it (CALLER_PREFERENCE),
    for tests of one service that call methods meant for different callers. Tests of refusals use
    `channel_as` with the identity they mean."""

    def __init__(self, addr: str, stub_class: type, service: str, *, bare: bool = True) -> None:
        self._addr, self._stub_class, self._service, self._bare = addr, stub_class, service, bare
        self.channels: dict[str, grpc.aio.Channel] = {}

    def _stub(self, identity: str) -> Any:
        if identity not in self.channels:
            self.channels[identity] = (bare_channel_as if self._bare else channel_as)(self._addr, identity)
        return self._stub_class(self.channels[identity])

    def __getattr__(self, method: str) -> Any:
        rule = rule_of(f"/{self._service}/{method}")
        if rule is None:
            raise AttributeError(f"{self._service}/{method} is in no row of shared/security/policy.py")
        identity = next(caller for caller in CALLER_PREFERENCE if caller in rule.callers)
        return getattr(self._stub(identity), method)

    async def close(self) -> None:
        for channel in self.channels.values():
            await channel.close()

"""TLS on real gRPC servers (shared/grpc_server.py) with certificates made at test time."""

from __future__ import annotations

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from shared.grpc_client import check_health, open_channel
from shared.grpc_server import start_server
from shared.security.tls import TlsConfigError, load_tls
from shared.settings import SecuritySettings, ServiceSettings
from tests.conftest import free_addr
from tests.security.certs import CertificateAuthority


@pytest.fixture(scope="module")
def ca(tmp_path_factory) -> CertificateAuthority:
    return CertificateAuthority(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def server_cert(ca):
    return ca.issue("server")


@pytest.fixture(scope="module")
def client_cert(ca):
    return ca.issue("client")


def _server_settings(ca, server_cert, **extra) -> ServiceSettings:
    return ServiceSettings(tls_cert_file=server_cert.cert, tls_key_file=server_cert.key, tls_ca_file=ca.cert, **extra)


async def _health_server(addr: str, settings: ServiceSettings):
    return await start_server(addr, lambda server: [], settings=settings)


async def _check(addr: str, security: SecuritySettings | None) -> health_pb2.HealthCheckResponse:
    async with open_channel(addr, security=security) as channel:
        return await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=3)


async def test_mutual_tls_serves_a_client_with_a_certificate_of_the_ca(addr, ca, server_cert, client_cert):
    running = await _health_server(addr, _server_settings(ca, server_cert))
    try:
        client = SecuritySettings(tls_cert_file=client_cert.cert, tls_key_file=client_cert.key, tls_ca_file=ca.cert)
        reply = await _check(addr, client)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
        assert await check_health(addr, security=client) == "SERVING"
    finally:
        await running.stop(0)


async def test_a_client_without_a_certificate_is_refused(addr, ca, server_cert):
    running = await _health_server(addr, _server_settings(ca, server_cert))
    try:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await _check(addr, SecuritySettings(tls_ca_file=ca.cert))
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        await running.stop(0)


async def test_plaintext_is_refused(addr, ca, server_cert):
    running = await _health_server(addr, _server_settings(ca, server_cert))
    try:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await _check(addr, SecuritySettings())
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        assert await check_health(addr, security=SecuritySettings()) == "UNREACHABLE"
    finally:
        await running.stop(0)


async def test_a_certificate_of_another_ca_is_refused_both_ways(addr, tmp_path, ca, server_cert):
    other = CertificateAuthority(tmp_path / "other", "another CA")
    stranger = other.issue("stranger")
    running = await _health_server(addr, _server_settings(ca, server_cert))
    try:
        # The client's certificate is not signed by the server's CA.
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await _check(addr, SecuritySettings(tls_cert_file=stranger.cert, tls_key_file=stranger.key, tls_ca_file=ca.cert))
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        # The client trusts another CA than the one that signed the server's certificate.
        with pytest.raises(grpc.aio.AioRpcError):
            await _check(addr, SecuritySettings(tls_cert_file=stranger.cert, tls_key_file=stranger.key, tls_ca_file=other.cert))
    finally:
        await running.stop(0)


async def test_without_client_certificates_required_tls_alone_is_enough(addr, ca, server_cert):
    running = await _health_server(addr, _server_settings(ca, server_cert, tls_require_client_cert=False))
    try:
        reply = await _check(addr, SecuritySettings(tls_ca_file=ca.cert))
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
        with pytest.raises(grpc.aio.AioRpcError):
            await _check(addr, SecuritySettings())
    finally:
        await running.stop(0)


def test_bad_tls_settings_say_what_to_fix(tmp_path, server_cert):
    with pytest.raises(TlsConfigError, match="COVEL_TLS_CERT_FILE and COVEL_TLS_KEY_FILE together"):
        load_tls(SecuritySettings(tls_cert_file=server_cert.cert))
    with pytest.raises(TlsConfigError, match=r"COVEL_TLS_CA_FILE=.*missing\.pem: cannot read it"):
        load_tls(SecuritySettings(tls_ca_file=tmp_path / "missing.pem"))
    (tmp_path / "not-pem.txt").write_text("hello")
    with pytest.raises(TlsConfigError, match="not a PEM file"):
        load_tls(SecuritySettings(tls_ca_file=tmp_path / "not-pem.txt"))
    assert load_tls(SecuritySettings()) is None


async def test_a_server_with_only_a_ca_does_not_start(addr, ca):
    with pytest.raises(TlsConfigError, match="a server needs its own certificate"):
        await _health_server(addr, ServiceSettings(tls_ca_file=ca.cert))


async def test_a_plaintext_health_port_serves_probes_while_tls_is_on(addr, ca, server_cert):
    """COVEL_<SERVICE>_HEALTH_PORT: health only, no TLS; the service itself stays behind mTLS."""
    health_port = int(free_addr().rsplit(":", 1)[1])
    settings = _server_settings(ca, server_cert, store_health_port=health_port)
    running = await start_server(addr, lambda server: [], settings=settings, service="store")
    try:
        assert running.health_port == health_port
        assert (await _check(f"127.0.0.1:{health_port}", SecuritySettings())).status == health_pb2.HealthCheckResponse.SERVING
        async with open_channel(f"127.0.0.1:{health_port}", security=SecuritySettings()) as channel:
            reflection = reflection_pb2_grpc.ServerReflectionStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                async for _ in reflection.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=3):
                    pass
            assert refused.value.code() == grpc.StatusCode.UNIMPLEMENTED
        with pytest.raises(grpc.aio.AioRpcError):
            await _check(addr, SecuritySettings())
        await running.set_serving(False)
        assert (await _check(f"127.0.0.1:{health_port}", SecuritySettings())).status == health_pb2.HealthCheckResponse.NOT_SERVING
    finally:
        await running.stop(0)

"""Service identity on a real store server: each caller is the identity its certificate names, and
each method runs only for the callers shared/security/policy.py allows (issue 18 item 1)."""

from __future__ import annotations

import argparse
import base64
import datetime
import io

import grpc
import pytest
import pytest_asyncio
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from grpc_health.v1 import health_pb2, health_pb2_grpc

from covel.store.v1 import store_pb2, store_pb2_grpc
from covel_cli import operator
from services.store.server import start, wait_closed
from services.store.settings import StoreSettings
from shared.grpc_client import open_channel
from shared.security import policy
from shared.security.service_identity import DevPki, identity_of_certificate, spiffe_id
from shared.settings import SecuritySettings
from tests.conftest import free_addr
from tests.support.identities import channel_as, run_pki, service_tls


def _leaf(pki: DevPki, folder, name: str, uris: list[str]):
    """A certificate of `pki`'s CA with these URI SANs (and 127.0.0.1), as a client presents it."""
    ca_cert = x509.load_pem_x509_certificate(pki.ca_cert.read_bytes())
    ca_key = serialization.load_pem_private_key(pki.ca_key.read_bytes(), password=None)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, name)]))
        .issuer_name(ca_cert.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1)).not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([*(x509.UniformResourceIdentifier(uri) for uri in uris),
                                                    x509.DNSName("localhost")]), critical=False)
        .sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]
    )
    cert_path, key_path = folder / f"{name}.pem", folder / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return SecuritySettings(tls_cert_file=cert_path, tls_key_file=key_path, tls_ca_file=pki.ca_cert)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def store_addr(tmp_path_factory):
    settings = StoreSettings(store_addr=free_addr(), data_dir=tmp_path_factory.mktemp("store"), **service_tls("store"))
    running = await start(settings)
    yield settings.store_addr
    await running.stop(0)
    await wait_closed()


async def _get_session(addr: str, security: SecuritySettings) -> grpc.aio.AioRpcError:
    async with open_channel(addr, security=security) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await store_pb2_grpc.TransactionalStoreStub(channel).GetSession(store_pb2.GetSessionRequest(session_id="s-1"), timeout=5)
    return failed.value


def test_every_method_of_our_protos_has_a_row():
    """A method added to a proto is refused to everyone until the table names its callers."""
    assert policy.unlisted_methods() == []


def test_a_certificate_names_one_covel_identity(tmp_path):
    pki = run_pki()
    assert identity_of_certificate(pki.files("hooks").cert.read_bytes()) == "hooks"
    for name, uris in {"none": [], "other-domain": ["spiffe://example.org/scheduler"], "unknown": [spiffe_id("intruder")],
                       "two": [spiffe_id("scheduler"), spiffe_id("operator")]}.items():
        settings = _leaf(pki, tmp_path, name, uris)
        assert identity_of_certificate(settings.tls_cert_file.read_bytes()) is None, name


async def test_the_store_serves_the_scheduler(store_addr):
    async with channel_as(store_addr, "scheduler") as channel:
        with pytest.raises(grpc.aio.AioRpcError) as missing:
            await store_pb2_grpc.TransactionalStoreStub(channel).GetSession(store_pb2.GetSessionRequest(session_id="s-1"))
    # Past the policy: the store itself answers.
    assert (missing.value.code(), missing.value.details()) == (grpc.StatusCode.NOT_FOUND, "session s-1 not found")


async def test_another_service_or_the_operator_is_refused_by_the_store(store_addr):
    for identity in ("hooks", "gateway", "registry", "operator"):
        refused = await _get_session(store_addr, run_pki().files(identity).security())
        assert refused.code() == grpc.StatusCode.PERMISSION_DENIED, identity
        assert refused.details() == (f"covel.store.v1.TransactionalStore/GetSession may be called by scheduler only "
                                     f"(the turn runner's own calls); the caller is {identity}")


async def test_a_certificate_of_the_ca_without_an_identity_is_unauthenticated(store_addr, tmp_path):
    for name, uris in {"anonymous": [], "impostor": ["spiffe://example.org/scheduler"]}.items():
        refused = await _get_session(store_addr, _leaf(run_pki(), tmp_path, name, uris))
        assert refused.code() == grpc.StatusCode.UNAUTHENTICATED, name
        assert "the caller's certificate names no covel identity" in refused.details()
        assert "spiffe://covel.local/<name>" in refused.details()


async def test_health_is_open_to_any_certificate_of_the_ca(store_addr, tmp_path):
    async with open_channel(store_addr, security=_leaf(run_pki(), tmp_path, "probe", [])) as channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


async def test_a_store_without_tls_answers_nobody(tmp_path):
    """No certificate, no identity: a store started without COVEL_TLS_* refuses every method, and says why."""
    settings = StoreSettings(store_addr=free_addr(), data_dir=tmp_path)
    running = await start(settings)
    try:
        refused = await _get_session(settings.store_addr, SecuritySettings())
        async with open_channel(settings.store_addr, security=SecuritySettings()) as channel:
            health = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
    finally:
        await running.stop(0)
        await wait_closed()
    assert refused.code() == grpc.StatusCode.UNAUTHENTICATED
    assert refused.details() == (
        "covel.store.v1.TransactionalStore/GetSession needs a client certificate of the service CA naming scheduler "
        "(spiffe://covel.local/<name>); this call came without one (set COVEL_TLS_CERT_FILE, COVEL_TLS_KEY_FILE, COVEL_TLS_CA_FILE)")
    assert health.status == health_pb2.HealthCheckResponse.SERVING


def test_the_dev_pki_is_kept_and_renewed(tmp_path):
    pki = DevPki(tmp_path / "pki").ensure()
    before = {path.name: path.read_bytes() for path in pki.folder.iterdir()}
    assert sorted(before) == sorted(f"{name}.{ext}" for name in (*policy.IDENTITIES, "ca") for ext in ("pem", "key"))
    assert all(oct((pki.folder / name).stat().st_mode & 0o777) == "0o600" for name in before if name.endswith(".key"))
    DevPki(pki.folder).ensure()
    assert {path.name: path.read_bytes() for path in pki.folder.iterdir()} == before
    # A leaf of another CA (say, a copied folder) is issued again; the others stay.
    other = DevPki(tmp_path / "other").ensure()
    pki.files("hooks").cert.write_bytes(other.files("hooks").cert.read_bytes())
    DevPki(pki.folder).ensure()
    after = {path.name: path.read_bytes() for path in pki.folder.iterdir()}
    assert after["hooks.pem"] not in (before["hooks.pem"], other.files("hooks").cert.read_bytes())
    assert {name: data for name, data in after.items() if not name.startswith("hooks.")} == {
        name: data for name, data in before.items() if not name.startswith("hooks.")}


def test_covel_certs_issues_one_secret_per_service_for_the_cluster(tmp_path):
    args = argparse.Namespace(out=str(tmp_path / "pki"), namespace="play", cluster_domain="cluster.local",
                              public_host=["covel.example.com"], secrets=True)
    out = io.StringIO()
    assert operator.certs(args, out) == 0
    secrets = {doc["metadata"]["name"]: doc for doc in yaml.safe_load_all(out.getvalue())}
    # The operator's certificate stays with the operator: no Secret for it.
    assert sorted(secrets) == sorted(f"covel-{service}-tls" for service in policy.SERVICES)
    store = secrets["covel-store-tls"]
    assert store["metadata"]["namespace"] == "play" and sorted(store["data"]) == ["ca.crt", "tls.crt", "tls.key"]
    cert = x509.load_pem_x509_certificate(base64.b64decode(store["data"]["tls.crt"]))
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.UniformResourceIdentifier) == ["spiffe://covel.local/store"]
    assert names.get_values_for_type(x509.DNSName) == [
        "covel-store", "covel-store.play", "covel-store.play.svc", "covel-store.play.svc.cluster.local"]
    scheduler = x509.load_pem_x509_certificate(base64.b64decode(secrets["covel-scheduler-tls"]["data"]["tls.crt"]))
    assert "covel.example.com" in scheduler.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    ca = x509.load_pem_x509_certificate(base64.b64decode(store["data"]["ca.crt"]))
    cert.verify_directly_issued_by(ca)
    assert (tmp_path / "pki" / "operator.key").exists()

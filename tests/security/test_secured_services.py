"""The five services with mTLS between them (each its own certificate, `covel up`'s dev PKI), the
scheduler's client API over TLS with a bearer token, as real processes."""

from __future__ import annotations

import io

import grpc
import pytest
import pytest_asyncio
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from covel_cli.launcher import ServiceGroup, free_port_addrs
from covel_cli.play import play, scripted_reader
from shared.errors import error_info
from shared.grpc_client import open_channel
from shared.security.auth import INVALID_TOKEN, MISSING_TOKEN
from shared.settings import REPO_ROOT, SecuritySettings
from shared.structs import from_struct
from tests.security.http_site import Site

TOKEN = "s3cret-token-for-tests"
HANDLER = """
async def handler(ctx):
    reply = await ctx.http.get("{declared}/from-a-function")
    try:
        await ctx.http.get("{undeclared}/leak")
        denied = ""
    except PermissionError as error:
        denied = str(error)
    return {{"status": reply.status_code, "path": reply.json()["path"], "denied": denied}}
"""


def _write_http_probe(root, declared: Site, undeclared: Site) -> None:
    """A function runtime that uses ctx.http: one declared origin, one not."""
    runtime = root / "http-probe" / "runtimes" / "fetch"
    runtime.mkdir(parents=True)
    (root / "http-probe" / "PLUGIN.md").write_text(
        f"---\nversion: 0.1.0\ndescription: Test plugin whose function runtime fetches over ctx.http.\n"
        f"permissions:\n  http:\n    - origin: {declared.origin}\n      methods: [GET]\n---\n"
    )
    (runtime / "RUNTIME.md").write_text("---\nschedule:\n  stage: post-turn\nfunction: {}\n---\nFetches over ctx.http.\n")
    (runtime / "handler.py").write_text(HANDLER.format(declared=declared.origin, undeclared=undeclared.origin))


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def secured(tmp_path_factory):
    folder = tmp_path_factory.mktemp("secured")
    token_file = folder / "api-token"
    token_file.write_text(TOKEN + "\n")  # as a mounted Secret often ends: the newline is dropped
    sites = Site(), Site()
    _write_http_probe(folder / "plugins", *sites)
    env = {
        "COVEL_PLUGIN_DIRS": f"{REPO_ROOT / 'plugins'}:{folder / 'plugins'}",
        "COVEL_API_TOKEN_FILE": str(token_file),
        # The declared site is on 127.0.0.1: the operator allows it (the sandbox's host refuses local addresses otherwise).
        "COVEL_SANDBOX_HTTP_ALLOW_PRIVATE_ORIGINS": sites[0].origin,
    }
    group = ServiceGroup(free_port_addrs(), folder / "data", extra_env=env, scheduler_tls=True)
    try:
        await group.start()
        # A public client of the scheduler: its CA, no certificate; the token proves who it is.
        client = group.security("scheduler")
        yield group, client, sites
    finally:
        await group.stop()
        for site in sites:
            site.close()


async def test_the_client_api_requires_the_bearer_token(secured):
    group, client, *_ = secured
    addr = group.addrs["scheduler"]
    async with open_channel(addr, security=client) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as missing:
            await scheduler_pb2_grpc.SchedulerStub(channel).CreateSession(scheduler_pb2.CreateSessionRequest(), timeout=5)
    assert missing.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert missing.value.details() == MISSING_TOKEN
    async with open_channel(addr, security=client, bearer_token="not-" + TOKEN) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as wrong:
            await scheduler_pb2_grpc.SchedulerStub(channel).CreateSession(scheduler_pb2.CreateSessionRequest(), timeout=5)
        stream = scheduler_pb2_grpc.SchedulerStub(channel).SubmitActions(scheduler_pb2.SubmitActionsRequest(session_id="x"), timeout=5)
        with pytest.raises(grpc.aio.AioRpcError) as wrong_stream:
            async for _ in stream:
                pass
    assert (wrong.value.code(), wrong.value.details()) == (grpc.StatusCode.UNAUTHENTICATED, INVALID_TOKEN)
    assert (wrong_stream.value.code(), wrong_stream.value.details()) == (grpc.StatusCode.UNAUTHENTICATED, INVALID_TOKEN)
    # A program can act on it: ErrorInfo with a stable reason, refused by the interceptor before any method ran.
    for refused in (missing, wrong, wrong_stream):
        info = error_info(refused.value)
        assert (info.reason, info.domain) == ("UNAUTHENTICATED", "covel.dev")
    async with open_channel(addr, security=client, bearer_token=TOKEN) as channel:
        created = await scheduler_pb2_grpc.SchedulerStub(channel).CreateSession(scheduler_pb2.CreateSessionRequest(), timeout=10)
    assert created.session.id


async def test_health_and_reflection_answer_without_a_token(secured):
    group, client, *_ = secured
    async with open_channel(group.addrs["scheduler"], security=client) as channel:
        health = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
        assert health.status == health_pb2.HealthCheckResponse.SERVING
        reflection = reflection_pb2_grpc.ServerReflectionStub(channel)
        replies = reflection.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5)
        names = [service.name async for reply in replies for service in reply.list_services_response.service]
    assert "covel.scheduler.v1.Scheduler" in names


async def test_services_refuse_plaintext_and_clients_without_a_certificate(secured):
    group, *_ = secured
    for name in ("store", "scheduler"):
        async with open_channel(group.addrs[name], security=SecuritySettings()) as plaintext:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await health_pb2_grpc.HealthStub(plaintext).Check(health_pb2.HealthCheckRequest(), timeout=3)
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    async with open_channel(group.addrs["store"], security=SecuritySettings(tls_ca_file=group.pki.ca_cert)) as no_cert:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await store_pb2_grpc.TransactionalStoreStub(no_cert).GetSession(store_pb2.GetSessionRequest(session_id="x"), timeout=3)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE


async def test_the_cli_plays_a_turn_over_tls_with_the_token(secured, monkeypatch):
    """The turn crosses all five services, each hop between them over mutual TLS; the CLI reaches the
    scheduler over TLS and sends the token from the environment."""
    group, client, *_ = secured
    monkeypatch.delenv("COVEL_TLS_CERT_FILE", raising=False)
    monkeypatch.delenv("COVEL_TLS_KEY_FILE", raising=False)
    monkeypatch.setenv("COVEL_TLS_CA_FILE", str(client.tls_ca_file))
    monkeypatch.setenv("COVEL_API_TOKEN", TOKEN)
    out = io.StringIO()
    code = await play(group.addrs["scheduler"], scripted_reader(["I knock on the door."]), out)
    assert code == 0, out.getvalue()
    assert "[turn 1 committed" in out.getvalue(), out.getvalue()


async def test_the_cli_without_the_token_says_what_to_send(secured, monkeypatch):
    group, client, *_ = secured
    monkeypatch.delenv("COVEL_TLS_CERT_FILE", raising=False)
    monkeypatch.delenv("COVEL_TLS_KEY_FILE", raising=False)
    monkeypatch.setenv("COVEL_TLS_CA_FILE", str(client.tls_ca_file))
    monkeypatch.delenv("COVEL_API_TOKEN", raising=False)
    out = io.StringIO()
    assert await play(group.addrs["scheduler"], scripted_reader(["hello"]), out) == 1
    assert f"(error UNAUTHENTICATED: {MISSING_TOKEN})" in out.getvalue()


async def test_a_function_runtime_reaches_declared_origins_only(secured):
    group, client, (declared, undeclared) = secured
    async with open_channel(group.addrs["scheduler"], security=client, bearer_token=TOKEN) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(
            requested_plugins=["http-probe"], approved_plugins=["http-probe"]), timeout=10)).session
        request = scheduler_pb2.SubmitActionsRequest(session_id=session.id, actions=[resources_pb2.PlayerAction(kind="do", text="I listen.")])
        turn = [event.turn_completed async for event in stub.SubmitActions(request, timeout=30)
                if event.WhichOneof("event") == "turn_completed"][0]
    result = next(r for r in turn.runtime_results if r.runtime_id == "http-probe/fetch")
    assert result.status == resources_pb2.RUNTIME_STATUS_SUCCESS, result.reason
    assert from_struct(result.output) == {
        "status": 200, "path": "/from-a-function",
        "denied": f"http permission denied: GET {undeclared.origin} is not declared in permissions.http of http-probe",
    }
    assert ("GET", "/from-a-function") in declared.seen
    assert undeclared.seen == []

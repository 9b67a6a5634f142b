"""Signing in on an OIDC issuer's own page (issue 41 item 2): a real local issuer (tests/security/oidc_issuer.py)
with the authorization code flow and PKCE, the web front as its public client, the five services trusting the
issuer's JWTs. In headless Chromium the sign-in form offers the issuer, the player comes back signed in as the
issuer's user, and the session it starts is that principal's. A code exchanged twice or with the wrong verifier
is refused."""

from __future__ import annotations

import base64
import hashlib

import httpx
import pytest
import pytest_asyncio

from covel.scheduler.v1 import scheduler_pb2, scheduler_pb2_grpc
from shared.grpc_client import open_channel
from tests.e2e.conftest import running_services
from tests.security.oidc_issuer import Issuer
from tests.web.conftest import running_web, shots

pytestmark = pytest.mark.asyncio(loop_scope="session")
CLIENT_ID = "covel-page"


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def issued_web(tmp_path_factory):
    issuer = Issuer()
    env = {"COVEL_OIDC_ISSUER": issuer.url, "COVEL_OIDC_AUDIENCE": CLIENT_ID, "COVEL_WEB_OIDC_CLIENT_ID": CLIENT_ID}
    try:
        async with running_services(tmp_path_factory.mktemp("oidc-web"), extra_env=env) as group, running_web(group) as front:
            yield front, issuer
    finally:
        issuer.close()


async def test_a_player_signs_in_on_the_issuers_page_and_plays_as_that_user(issued_web, browser, tmp_path) -> None:
    front, issuer = issued_web
    issuer.login_as = "olivia"
    page = await browser.new_page(viewport={"width": 1100, "height": 900})
    await page.goto(front.url)
    offered = page.locator("#signin-oidc")
    await offered.wait_for()
    assert await offered.text_content() == "Sign in with your account"
    await page.screenshot(path=shots(tmp_path) / "oidc-offered.png", full_page=True)
    await offered.click()
    # To the issuer and back: the code exchanged, the issuer's ID token kept as the page's bearer token.
    await page.locator("button[data-world='demo-world']").wait_for(timeout=60_000)
    assert "code=" not in page.url and "state=" not in page.url
    token = await page.evaluate("localStorage.getItem('covelToken')")
    async with open_channel(front.group.addrs["scheduler"], bearer_token=token) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(), timeout=30)).session
    assert session.owner == "olivia"
    await page.close()


async def test_the_token_exchange_refuses_a_spent_code_a_wrong_verifier_and_bad_input(issued_web) -> None:
    front, issuer = issued_web
    async with httpx.AsyncClient(follow_redirects=False) as client:
        config = (await client.get(f"{front.url}/api/auth")).json()["oidc"]
        assert config["clientId"] == CLIENT_ID and config["authorizationEndpoint"] == f"{issuer.url}/authorize"
        verifier = "v" * 64
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        redirect = f"{front.url}/"
        back = await client.get(config["authorizationEndpoint"], params={
            "response_type": "code", "client_id": CLIENT_ID, "redirect_uri": redirect, "state": "s", "code_challenge": challenge,
            "code_challenge_method": "S256"})
        code = httpx.URL(back.headers["location"]).params["code"]
        wrong = await client.post(f"{front.url}/api/auth/token", json={"code": code, "codeVerifier": "w" * 64, "redirectUri": redirect})
        assert wrong.status_code == 401 and "refused" in wrong.json()["message"]
        spent = await client.post(f"{front.url}/api/auth/token", json={"code": code, "codeVerifier": verifier, "redirectUri": redirect})
        assert spent.status_code == 401, "a code is spent by its first exchange, even a refused one"
        bad = await client.post(f"{front.url}/api/auth/token", json={"code": "", "codeVerifier": verifier, "redirectUri": redirect})
        assert bad.status_code == 400 and bad.json()["fieldViolations"][0]["field"] == "code"

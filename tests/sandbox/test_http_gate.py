"""The host's side of covel.http (shared/sandbox/http_gate.py) on its own: whatever a worker sends,
only declared origins and methods, public addresses (or an origin the operator allows), the address it
checked (never a second lookup), one hop at a time, and bounded bodies."""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import socket

import pytest

from shared.plugin_sdk.http_client import HttpPermissionDenied, http_rules
from shared.sandbox.http_gate import HttpGate, HttpLimitExceeded, is_public
from shared.sandbox.settings import SandboxSettings
from tests.security.http_site import Site


@pytest.fixture(scope="module")
def site():
    found = Site()
    yield found
    found.close()


def gate(**settings) -> HttpGate:
    return HttpGate(SandboxSettings(**settings))


def rules(*origins: str, methods=None):
    return http_rules([(f"permissions.http[{i}]", {"origin": o} | ({"methods": methods} if methods else {}))
                       for i, o in enumerate(origins)])


def message(url: str, method: str = "GET", body: bytes = b"") -> dict:
    return {"method": method, "url": url, "headers": [["accept", "*/*"]], "body": base64.b64encode(body).decode()}


@pytest.mark.parametrize("address", ["127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "100.64.0.1",
                                     "0.0.0.0", "::1", "fe80::1", "fd00:ec2::254", "::ffff:127.0.0.1", "224.0.0.1"])
def test_addresses_that_are_not_public(address: str) -> None:
    assert not is_public(ipaddress.ip_address(address))


def test_public_addresses() -> None:
    assert is_public(ipaddress.ip_address("93.184.216.34")) and is_public(ipaddress.ip_address("2606:2800:220:1::1"))


async def test_the_worker_s_word_counts_for_nothing(site: Site) -> None:
    before = list(site.seen)
    with pytest.raises(HttpPermissionDenied, match=f"POST {site.origin} is not declared in permissions.http of p"):
        await gate(sandbox_http_allow_private_origins=[site.origin]).request("p", rules(site.origin, methods=["GET"]),
                                                                             message(f"{site.origin}/x", "POST"))
    with pytest.raises(HttpPermissionDenied, match="is not declared"):
        await gate().request("p", (), message("https://example.com/"))
    assert site.seen == before


async def test_a_name_is_resolved_once_and_the_checked_address_is_the_one_connected_to(site: Site, monkeypatch) -> None:
    """DNS rebinding: the host resolves the name itself, refuses a private answer, and never resolves again to connect."""
    port = int(site.origin.rsplit(":", 1)[1])
    answers = {"rebind.example": ["93.184.216.34", "127.0.0.1"], "private.example": ["10.0.0.7"]}
    lookups: list[str] = []

    async def fake_getaddrinfo(host, port, **kwargs):
        lookups.append(host)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port)) for address in answers[host]]

    loop = asyncio.get_running_loop()
    monkeypatch.setattr(loop, "getaddrinfo", fake_getaddrinfo)
    with pytest.raises(HttpPermissionDenied, match=r"private\.example:\d+ resolves to 10\.0\.0\.7, which is not a public address"):
        await gate().request("p", rules(f"http://private.example:{port}"), message(f"http://private.example:{port}/"))
    chosen: list[str] = []

    async def record(self, method, url, address, headers, body):
        chosen.append(address)
        return {"status": 204, "headers": [], "body": ""}

    monkeypatch.setattr(HttpGate, "_send", record)
    await gate().request("p", rules(f"http://rebind.example:{port}"), message(f"http://rebind.example:{port}/"))
    assert chosen == ["93.184.216.34"] and lookups == ["private.example", "rebind.example"]


async def test_a_redirect_is_one_hop_whose_next_request_is_checked_again(site: Site) -> None:
    other = Site()
    try:
        host = gate(sandbox_http_allow_private_origins=[site.origin, other.origin])
        answer = await host.request("p", rules(site.origin), message(f"{site.origin}/redirect?to={other.origin}/stolen"))
        assert answer["status"] == 302 and dict(answer["headers"])["location"] == f"{other.origin}/stolen"
        with pytest.raises(HttpPermissionDenied, match=f"GET {other.origin} is not declared"):
            await host.request("p", rules(site.origin), message(f"{other.origin}/stolen"))
        assert other.seen == []
    finally:
        other.close()


async def test_bodies_are_bounded(site: Site) -> None:
    host = gate(sandbox_http_allow_private_origins=[site.origin], sandbox_http_max_request_bytes=10,
                sandbox_http_max_response_bytes=2048)
    before = list(site.seen)
    with pytest.raises(HttpLimitExceeded, match="COVEL_SANDBOX_HTTP_MAX_REQUEST_BYTES"):
        await host.request("p", rules(site.origin), message(f"{site.origin}/up", "POST", b"x" * 11))
    assert site.seen == before
    with pytest.raises(HttpLimitExceeded, match="COVEL_SANDBOX_HTTP_MAX_RESPONSE_BYTES"):
        await host.request("p", rules(site.origin), message(f"{site.origin}/big?bytes=4096"))
    answer = await host.request("p", rules(site.origin), message(f"{site.origin}/big?bytes=2000"))
    assert len(base64.b64decode(answer["body"])) == 2000

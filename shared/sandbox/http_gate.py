"""covel.http / ctx.http of sandboxed plugin code, sent by the host (docs/security.md, "What plugin code can reach").

A worker has no network (shared/sandbox/isolation.py): its HTTP client hands each request to the
host over the channel (`sandbox.http`, shared/sandbox/http_channel.py), one hop at a time, so every
redirect the client follows is a request of its own that passes here again. For each the host:

1. checks the method and origin against the plugin's permissions.http (the rules the host holds,
   never the worker's word), before anything is resolved or sent;
2. resolves the name itself and keeps only public addresses: loopback, private, link-local (the
   cloud metadata address), shared, multicast and reserved ones are refused unless the origin is
   listed in COVEL_SANDBOX_HTTP_ALLOW_PRIVATE_ORIGINS;
3. connects to the address it checked (no second lookup: no DNS rebinding), with the name as the
   Host header and the TLS server name, so certificates are checked against the name;
4. bounds the request body, the response body (decoded), the time of the request and the number of
   requests of one plugin in flight at once (COVEL_SANDBOX_HTTP_*).
"""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import socket
from collections.abc import Iterable, Mapping
from typing import Any

import httpx

from shared.plugin_sdk.http_client import DEFAULT_PORTS, HttpPermissionDenied, HttpRule, origin_text, parse_rule
from shared.sandbox.settings import SandboxSettings

# Headers that describe one connection, not the request: the host sets its own.
HOP_HEADERS = frozenset({"host", "connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer",
                         "upgrade", "content-length", "proxy-authorization"})
# Response headers not passed back: the body goes back decoded and whole.
DROPPED_RESPONSE_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding", "connection", "keep-alive"})
PRIVATE_HINT = "an operator may allow it for development with COVEL_SANDBOX_HTTP_ALLOW_PRIVATE_ORIGINS"


class HttpLimitExceeded(ValueError):
    """A request or response past the sandbox's bounds."""


def is_public(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """An address on the public internet (not loopback, private, link-local, shared, multicast or reserved)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_global and not address.is_multicast


def _origin_key(url: httpx.URL) -> tuple[str, str, int]:
    return url.scheme, url.host.lower(), url.port or DEFAULT_PORTS.get(url.scheme, 0)


class HttpGate:
    """The host's HTTP client for its workers (see the module doc); one per pool."""

    def __init__(self, settings: SandboxSettings) -> None:
        self.settings = settings
        self._allow_private = {(rule.scheme, rule.host, rule.port) for rule in
                               (parse_rule({"origin": origin}, "COVEL_SANDBOX_HTTP_ALLOW_PRIVATE_ORIGINS")
                                for origin in settings.sandbox_http_allow_private_origins)}
        self._in_flight: dict[str, asyncio.Semaphore] = {}

    async def request(self, plugin_id: str, rules: Iterable[HttpRule], message: Mapping[str, Any]) -> dict[str, Any]:
        """One hop: {method, url, headers: [[name, value]], body: base64} -> {status, headers, body: base64, http_version}."""
        method = str(message.get("method") or "GET").upper()
        try:
            url = httpx.URL(str(message.get("url") or ""))
        except httpx.InvalidURL as error:
            raise ValueError(f"http: not a URL ({error})") from None
        if url.scheme not in DEFAULT_PORTS or not url.host:
            raise ValueError(f"http: {url.scheme or 'a URL without a scheme'}: only http and https URLs")
        key = _origin_key(url)
        if not any(rule.allows(method, *key) for rule in rules):
            raise HttpPermissionDenied(
                f"http permission denied: {method} {origin_text(url)} is not declared in permissions.http of {plugin_id}")
        body = base64.b64decode(str(message.get("body") or ""))
        if len(body) > self.settings.sandbox_http_max_request_bytes:
            raise HttpLimitExceeded(f"http: a request body of {len(body)} bytes is over the sandbox's "
                                    f"{self.settings.sandbox_http_max_request_bytes} (COVEL_SANDBOX_HTTP_MAX_REQUEST_BYTES)")
        headers = [(str(name), str(value)) for name, value in message.get("headers") or []
                   if str(name).lower() not in HOP_HEADERS]
        gate = self._in_flight.setdefault(plugin_id, asyncio.Semaphore(self.settings.sandbox_http_concurrency))
        try:
            async with asyncio.timeout(self.settings.sandbox_http_timeout_s):
                async with gate:
                    address = await self._vetted_address(url)
                    return await self._send(method, url, address, headers, body)
        except TimeoutError:
            raise TimeoutError(f"http: {method} {origin_text(url)} took longer than the sandbox's "
                               f"{self.settings.sandbox_http_timeout_s:g} s (COVEL_SANDBOX_HTTP_TIMEOUT_S)") from None

    async def _vetted_address(self, url: httpx.URL) -> str:
        """The address to connect to: the first public one the name resolves to (any, for an allowed origin)."""
        host = url.host
        try:
            candidates = [ipaddress.ip_address(host)]
        except ValueError:
            try:
                found = await asyncio.get_running_loop().getaddrinfo(host, url.port or DEFAULT_PORTS[url.scheme],
                                                                     type=socket.SOCK_STREAM)
            except socket.gaierror as error:
                raise ConnectionError(f"http: {host} does not resolve ({error.strerror})") from None
            candidates = [ipaddress.ip_address(str(entry[4][0]).split("%", 1)[0]) for entry in found]
        if _origin_key(url) in self._allow_private:
            return str(candidates[0])
        for address in candidates:
            if is_public(address):
                return str(address)
        raise HttpPermissionDenied(
            f"http permission denied: {origin_text(url)} resolves to {candidates[0]}, which is not a public address "
            f"(loopback, private, link-local or metadata); {PRIVATE_HINT}")

    async def _send(self, method: str, url: httpx.URL, address: str, headers: list[tuple[str, str]], body: bytes) -> dict[str, Any]:
        limit = self.settings.sandbox_http_max_response_bytes
        target = url.copy_with(host=address)
        netloc = url.host if url.port in (None, DEFAULT_PORTS[url.scheme]) else f"{url.host}:{url.port}"
        if ":" in url.host and not url.host.startswith("["):
            netloc = f"[{url.host}]" + (f":{url.port}" if url.port else "")
        request_headers = [("host", netloc), *headers]
        extensions = {"sni_hostname": url.host} if url.scheme == "https" else {}
        # A client per request: a pooled connection is never reused for another name at the same address.
        async with httpx.AsyncClient(follow_redirects=False, trust_env=False, timeout=self.settings.sandbox_http_timeout_s) as client:
            request = client.build_request(method, target, headers=request_headers, content=body, extensions=extensions)
            response = await client.send(request, stream=True)
            try:
                declared = response.headers.get("content-length")
                if declared is not None and declared.isdigit() and int(declared) > limit:
                    raise self._too_large(url, int(declared))
                chunks, size = [], 0
                async for chunk in response.aiter_bytes():
                    size += len(chunk)
                    if size > limit:
                        raise self._too_large(url, size)
                    chunks.append(chunk)
            finally:
                await response.aclose()
        return {
            "status": response.status_code, "http_version": response.http_version,
            "headers": [[name, value] for name, value in response.headers.multi_items() if name.lower() not in DROPPED_RESPONSE_HEADERS],
            "body": base64.b64encode(b"".join(chunks)).decode("ascii"),
        }

    def _too_large(self, url: httpx.URL, size: int) -> HttpLimitExceeded:
        return HttpLimitExceeded(f"http: the response of {origin_text(url)} is over the sandbox's {self.settings.sandbox_http_max_response_bytes} "
                                 f"bytes ({size} so far; COVEL_SANDBOX_HTTP_MAX_RESPONSE_BYTES)")

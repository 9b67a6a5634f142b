"""`covel.http`: the HTTP client plugin code gets, limited to the package's `permissions.http`.

    permissions:
      http:
        - origin: https://api.example.com
          methods: [GET, POST]        # omitted: every method

    async def lookup(ctx, args):
        reply = await covel.http.get("https://api.example.com/words", params={"q": args["word"]})
        return reply.json()

A request to an origin or with a method the package does not declare fails before anything
is sent, with `HttpPermissionDenied: http permission denied: POST https://other.example is not
declared in permissions.http of my-plugin`. Redirects are followed only while they stay on
declared origins: every hop passes the same check. The client is httpx's `AsyncClient`
(`request`, `get`, `post`, … return an `httpx.Response`).

In a sandbox worker (which has no network) the client's requests go to the host, which checks
them again against the rules it holds and sends them (shared/sandbox/http_gate.py): the worker
sets the transport of every client made there (`set_default_transport`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from shared.manifest import CompiledManifest
from shared.manifest.runtime import Permissions

DEFAULT_PORTS = {"http": 80, "https": 443}
METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
DEFAULT_TIMEOUT_S = 30.0
MAX_REDIRECTS = 5


class HttpPermissionDenied(PermissionError):
    """A request that permissions.http does not allow; raised before the request is sent."""


@dataclass(frozen=True)
class HttpRule:
    origin: str
    scheme: str
    host: str
    port: int
    # None: every method.
    methods: frozenset[str] | None

    def allows(self, method: str, scheme: str, host: str, port: int) -> bool:
        return (scheme, host, port) == (self.scheme, self.host, self.port) and (self.methods is None or method in self.methods)


def _origin_parts(url: httpx.URL) -> tuple[str, str, int]:
    return url.scheme, url.raw_host.decode("ascii").lower(), url.port or DEFAULT_PORTS.get(url.scheme, 0)


def origin_text(url: httpx.URL) -> str:
    scheme, host, port = _origin_parts(url)
    return f"{scheme}://{host}" + ("" if port == DEFAULT_PORTS.get(scheme) else f":{port}")


def parse_rule(entry: Mapping[str, Any], where: str) -> HttpRule:
    """One permissions.http entry; ValueError naming `where` when it is not `{origin, methods?}` with a bare origin."""
    origin = entry.get("origin") if isinstance(entry, Mapping) else None
    if not isinstance(origin, str) or not origin.strip():
        raise ValueError(f"{where}.origin: write an origin such as https://api.example.com")
    try:
        url = httpx.URL(origin.strip())
    except httpx.InvalidURL as error:
        raise ValueError(f"{where}.origin {origin!r}: not a URL ({error})") from None
    if url.scheme not in DEFAULT_PORTS or not url.host:
        raise ValueError(f"{where}.origin {origin!r}: write scheme://host[:port] with http or https")
    if url.userinfo or url.path not in ("", "/") or url.query or url.fragment:
        raise ValueError(f"{where}.origin {origin!r}: an origin has no path, query, fragment or credentials; write {origin_text(url)}")
    methods = entry.get("methods")
    if methods is not None:
        if not isinstance(methods, list) or not all(isinstance(m, str) and m.upper() in METHODS for m in methods):
            raise ValueError(f"{where}.methods: a list of {', '.join(METHODS)}")
        methods = frozenset(m.upper() for m in methods)
    scheme, host, port = _origin_parts(url)
    return HttpRule(origin_text(url), scheme, host, port, methods)


def declared_http_permissions(
    package: Permissions | None, runtimes: Iterable[tuple[str, Permissions | None]] = ()
) -> tuple[tuple[str, Mapping], ...]:
    """(where, entry) of every permissions.http entry of a package: the root's, then each runtime's
    (runtime id, its compiled permissions); entries in their JSON form, as parse_rule reads them."""
    found: list[tuple[str, Mapping]] = []
    for prefix, permissions in [("", package), *((f"{runtime_id}: ", own) for runtime_id, own in runtimes)]:
        for index, entry in enumerate((permissions.http or []) if permissions is not None else []):
            found.append((f"{prefix}permissions.http[{index}]", entry.to_json()))
    return tuple(found)


def invalid_http_permissions(declared: Iterable[tuple[str, Mapping]]) -> str | None:
    """Why the declarations cannot be used (a load error for the plugin), or None."""
    problems = []
    for where, entry in declared:
        try:
            parse_rule(entry, where)
        except ValueError as error:
            problems.append(str(error))
    return "; ".join(problems) or None


def http_rules(declared: Iterable[tuple[str, Mapping]]) -> tuple[HttpRule, ...]:
    """The rules of the declarations that parse (one that does not allows nothing; the plugin does not load)."""
    rules = []
    for where, entry in declared:
        try:
            rules.append(parse_rule(entry, where))
        except ValueError:
            continue
    return tuple(rules)


class _PermissionCheck(httpx.AsyncBaseTransport):
    """Checks every request, redirect hops included, before the wrapped transport sends it."""

    def __init__(self, plugin_id: str, rules: tuple[HttpRule, ...], inner: httpx.AsyncBaseTransport) -> None:
        self._plugin_id = plugin_id
        self._rules = rules
        self._inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        method = request.method.upper()
        parts = _origin_parts(request.url)
        if not any(rule.allows(method, *parts) for rule in self._rules):
            raise HttpPermissionDenied(
                f"http permission denied: {method} {origin_text(request.url)} is not declared in permissions.http of {self._plugin_id}"
            )
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


Declarations = Iterable[tuple[str, Mapping]]


class _SharedPool(httpx.AsyncBaseTransport):
    """One connection pool for the many short-lived clients of function runtimes; never closed by them."""

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        pass


_shared: dict[str, _SharedPool] = {}
# Makes the transport of clients given none (a sandbox worker: to the host over its channel).
_default_transport: list[Callable[[], httpx.AsyncBaseTransport]] = []


def set_default_transport(make: Callable[[], httpx.AsyncBaseTransport]) -> None:
    """Every PluginHttpClient of this process made without a transport sends through `make()`'s."""
    _default_transport[:] = [make]


def shared_pool() -> httpx.AsyncBaseTransport:
    if "pool" not in _shared:
        _shared["pool"] = _SharedPool()
    return _shared["pool"]


class PluginHttpClient:
    """The `covel.http` of one plugin. The underlying httpx client opens on first use.

    `declared` may be a callable: then it is read (and checked) only when the client is first
    used, so a context that never makes a request pays nothing for it."""

    def __init__(self, plugin_id: str, declared: Declarations | Callable[[], Declarations] = (), *,
                 timeout_s: float = DEFAULT_TIMEOUT_S, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.plugin_id = plugin_id
        # The rules, or until first use the callable that reads the declarations.
        self._rules: tuple[HttpRule, ...] | Callable[[], Declarations] = declared if callable(declared) else self._parse(declared)
        self._timeout_s = timeout_s
        self._transport = transport
        self._client: httpx.AsyncClient | None = None

    @staticmethod
    def _parse(declared: Declarations) -> tuple[HttpRule, ...]:
        return tuple(parse_rule(entry, where) for where, entry in declared)

    @property
    def rules(self) -> tuple[HttpRule, ...]:
        if callable(self._rules):
            self._rules = self._parse(self._rules())
        return self._rules

    def allows(self, method: str, url: str) -> bool:
        parts = _origin_parts(httpx.URL(url))
        return any(rule.allows(method.upper(), *parts) for rule in self.rules)

    def _open(self) -> httpx.AsyncClient:
        if self._client is None or self._client.is_closed:
            inner = self._transport or (_default_transport[0]() if _default_transport else httpx.AsyncHTTPTransport())
            self._client = httpx.AsyncClient(
                transport=_PermissionCheck(self.plugin_id, self.rules, inner), timeout=self._timeout_s,
                follow_redirects=True, max_redirects=MAX_REDIRECTS,
                headers={"user-agent": f"covel-plugin/{self.plugin_id}"},
            )
        return self._client

    async def request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        return await self._open().request(method, url, **kwargs)

    async def get(self, url: str, **kwargs: Any) -> httpx.Response:
        return await self.request("GET", url, **kwargs)

    async def head(self, url: str, **kwargs: Any) -> httpx.Response:
        return await self.request("HEAD", url, **kwargs)

    async def post(self, url: str, **kwargs: Any) -> httpx.Response:
        return await self.request("POST", url, **kwargs)

    async def put(self, url: str, **kwargs: Any) -> httpx.Response:
        return await self.request("PUT", url, **kwargs)

    async def patch(self, url: str, **kwargs: Any) -> httpx.Response:
        return await self.request("PATCH", url, **kwargs)

    async def delete(self, url: str, **kwargs: Any) -> httpx.Response:
        return await self.request("DELETE", url, **kwargs)

    async def options(self, url: str, **kwargs: Any) -> httpx.Response:
        return await self.request("OPTIONS", url, **kwargs)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def __repr__(self) -> str:
        return f"PluginHttpClient({self.plugin_id!r}, origins={[rule.origin for rule in self.rules]})"


def function_http_client(plugin_id: str, package: Permissions | None, manifest: CompiledManifest) -> PluginHttpClient:
    """`ctx.http` of a function runtime (and its guard): the package's root permissions.http and the
    runtime's own, over the process's shared connection pool."""
    return PluginHttpClient(
        plugin_id, lambda: declared_http_permissions(package, [(manifest.id, manifest.permissions)]), transport=shared_pool()
    )

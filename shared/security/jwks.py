"""An OIDC issuer's signing keys (its JWKS), as the services check bearer JWTs against them.

Fetched once at a time: every check that needs a fetch waits on the one in flight (bounded by
JWKS_TIMEOUT_S), never one after another, and known keys keep serving while a fetch stalls. Keys are
refreshed in the background once older than REFRESH_S; a token naming a key the set lacks (a rotation)
fetches again, at most once per UNKNOWN_KEY_REFETCH_S so that made-up key ids cannot make the service
hammer the issuer. Without COVEL_OIDC_JWKS_URL the issuer's discovery document says where the keys are.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

import httpx
import jwt

from shared.logs import get_logger

JWKS_TIMEOUT_S = 5.0
REFRESH_S = 300.0
UNKNOWN_KEY_REFETCH_S = 30.0

log = get_logger(component="jwks")


class IssuerKeys:
    """One issuer's keys by key id; `key_for(kid)` answers from them, fetching only when it must."""

    def __init__(self, issuer: str, jwks_url: str = "", *, timeout_s: float = JWKS_TIMEOUT_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._issuer = issuer.rstrip("/")
        self._jwks_url = jwks_url
        self._timeout_s = timeout_s
        self._clock = clock
        self._keys: dict[str, jwt.PyJWK] = {}
        self._fetched_at: float | None = None
        self._fetching: asyncio.Task[None] | None = None
        self.fetches = 0

    async def key_for(self, kid: str | None) -> jwt.PyJWK:
        """The key `kid` names (PyJWKClientConnectionError when the keys cannot be fetched, PyJWKClientError when
        the issuer publishes no such key)."""
        if self._fetched_at is None:
            await self._fetch_once()
        elif self._clock() - self._fetched_at > REFRESH_S:
            self._start_fetch()  # in the background: the keys known meanwhile keep serving
        key = self._find(kid)
        if key is None and self._clock() - (self._fetched_at or 0) > UNKNOWN_KEY_REFETCH_S:
            await self._fetch_once()
            key = self._find(kid)
        if key is None:
            raise jwt.PyJWKClientError(f"the issuer publishes no key {kid!r}")
        return key

    def _find(self, kid: str | None) -> jwt.PyJWK | None:
        if kid is None and len(self._keys) == 1:
            return next(iter(self._keys.values()))
        return self._keys.get(kid) if kid is not None else None

    async def _fetch_once(self) -> None:
        """The fetch in flight, or a new one; its error (if any) is every waiter's."""
        await asyncio.shield(self._start_fetch())

    def _start_fetch(self) -> asyncio.Task[None]:
        if self._fetching is None or self._fetching.done():
            self._fetching = asyncio.get_running_loop().create_task(self._fetch())
            self._fetching.add_done_callback(_quiet)
        return self._fetching

    async def _fetch(self) -> None:
        self.fetches += 1
        try:
            async with httpx.AsyncClient(timeout=self._timeout_s) as client:
                url = self._jwks_url or await self._discovered(client)
                document = (await client.get(url)).raise_for_status().json()
            keys = jwt.PyJWKSet.from_dict(document).keys
        except (httpx.HTTPError, ValueError, TypeError, jwt.PyJWKSetError) as error:
            log.warning("jwks.fetch_failed", issuer=self._issuer, error=f"{type(error).__name__}: {error}")
            raise jwt.PyJWKClientConnectionError(f"cannot fetch the issuer's keys: {error}") from None
        self._keys = {key.key_id: key for key in keys if key.key_id}
        if len(keys) == 1 and not keys[0].key_id:
            self._keys = {"": keys[0]}
        self._fetched_at = self._clock()

    async def _discovered(self, client: httpx.AsyncClient) -> str:
        discovery = f"{self._issuer}/.well-known/openid-configuration"
        document = (await client.get(discovery)).raise_for_status().json()
        jwks_uri = document.get("jwks_uri") if isinstance(document, dict) else None
        if not isinstance(jwks_uri, str) or not jwks_uri:
            raise ValueError(f"{discovery} names no jwks_uri")
        self._jwks_url = jwks_uri
        return jwks_uri


def _quiet(task: asyncio.Task[None]) -> None:
    """A background refresh's failure is logged in _fetch; nobody else need hear of it."""
    with contextlib.suppress(asyncio.CancelledError, Exception):
        task.exception()

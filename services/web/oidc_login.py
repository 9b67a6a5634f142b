"""Signing in through an OIDC issuer's own page: the authorization code flow with PKCE (RFC 7636), the page a
public client of the issuer (docs/web.md "Signing in").

The page asks `GET /api/auth` what it may offer: the issuer's authorization endpoint (from its discovery document),
the client id and scope. It sends the player there with a fresh PKCE challenge and state; the issuer sends the player
back to the page with a code, which the page hands to `POST /api/auth/token` with its verifier: this front exchanges
it at the issuer's token endpoint (a server-to-server call: no CORS on the issuer needed) and answers the token the
page then sends as its bearer token (the ID token by default: COVEL_WEB_OIDC_TOKEN). The scheduler checks that token
as it checks every JWT (shared/security/principals.py): this front decides nothing about who the player is.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from shared.logs import get_logger

log = get_logger(component="web")
DISCOVERY_TTL_S = 600.0
ISSUER_TIMEOUT_S = 10.0
MAX_FIELD = 4096


class OidcLogin:
    def __init__(self, issuer: str, client_id: str, scope: str = "openid", token: str = "id_token") -> None:
        self.issuer, self.client_id, self.scope, self.token = issuer.rstrip("/"), client_id, scope, token
        self._discovery: tuple[float, dict[str, Any]] | None = None

    def routes(self) -> list[Route]:
        return [Route("/api/auth", self.config, methods=["GET"]), Route("/api/auth/token", self.exchange, methods=["POST"])]

    async def _endpoints(self) -> dict[str, Any]:
        if self._discovery is None or time.monotonic() - self._discovery[0] > DISCOVERY_TTL_S:
            async with httpx.AsyncClient(timeout=ISSUER_TIMEOUT_S) as client:
                found = (await client.get(f"{self.issuer}/.well-known/openid-configuration")).raise_for_status().json()
            self._discovery = (time.monotonic(), found)
        return self._discovery[1]

    async def config(self, _request: Request) -> Response:
        try:
            endpoints = await self._endpoints()
        except (httpx.HTTPError, ValueError) as error:
            log.warning("oidc.discovery_failed", issuer=self.issuer, error=str(error))
            return JSONResponse({"code": "UNAVAILABLE", "message": f"the sign-in issuer {self.issuer} does not answer; use a token"}, 503)
        return JSONResponse({"oidc": {"issuer": self.issuer, "clientId": self.client_id, "scope": self.scope,
                                      "authorizationEndpoint": endpoints.get("authorization_endpoint", "")}})

    async def exchange(self, request: Request) -> Response:
        try:
            body = await request.json()
        except ValueError:
            body = None
        fields = {name: body.get(name) for name in ("code", "codeVerifier", "redirectUri")} if isinstance(body, dict) else {}
        for name in ("code", "codeVerifier", "redirectUri"):
            value = fields.get(name)
            if not isinstance(value, str) or not value or len(value) > MAX_FIELD:
                return JSONResponse({"code": "INVALID_ARGUMENT", "message": f"{name}: give the {name} of the sign-in",
                                     "fieldViolations": [{"field": name, "description": "a non-empty string"}]}, 400)
        try:
            endpoint = (await self._endpoints())["token_endpoint"]
            async with httpx.AsyncClient(timeout=ISSUER_TIMEOUT_S) as client:
                answer = await client.post(endpoint, data={
                    "grant_type": "authorization_code", "code": fields["code"], "code_verifier": fields["codeVerifier"],
                    "redirect_uri": fields["redirectUri"], "client_id": self.client_id})
        except (httpx.HTTPError, KeyError, ValueError) as error:
            log.warning("oidc.exchange_failed", issuer=self.issuer, error=str(error))
            return JSONResponse({"code": "UNAVAILABLE", "message": f"the sign-in issuer {self.issuer} does not answer; try again"}, 503)
        tokens = answer.json() if answer.headers.get("content-type", "").startswith("application/json") else {}
        token = tokens.get(self.token) if isinstance(tokens, dict) else None
        if answer.status_code != 200 or not isinstance(token, str):
            why = tokens.get("error_description") or tokens.get("error") if isinstance(tokens, dict) else None
            return JSONResponse({"code": "UNAUTHENTICATED", "message": f"the issuer refused the sign-in: {why or answer.status_code}; "
                                 "sign in again"}, 401)
        return JSONResponse({"token": token})

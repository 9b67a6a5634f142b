"""Settings of the web front (COVEL_ environment variables)."""

from __future__ import annotations

from typing import Literal

from shared.settings import ServiceSettings

DEFAULT_WEB_ADDR = "127.0.0.1:8080"


class WebSettings(ServiceSettings):
    # Where the page and the HTTP/JSON API listen (host:port).
    web_addr: str = DEFAULT_WEB_ADDR
    # How long a unary call to the scheduler may take before the API answers 504.
    web_call_timeout_s: float = 30.0
    # Where /metrics listens (else COVEL_METRICS_PORT); none: no metrics.
    web_metrics_port: int | None = None
    # Signing in through an OIDC issuer's own page (docs/web.md "Signing in"): the issuer the scheduler trusts
    # (COVEL_OIDC_ISSUER, the same setting) and this page's client id there (a public client: authorization code
    # with PKCE, redirect URI the page's own address). Empty client id: the page offers the token form only.
    oidc_issuer: str = ""
    web_oidc_client_id: str = ""
    web_oidc_scope: str = "openid"
    # Which of the issuer's tokens the page sends as its bearer token: the ID token (its audience is the client id:
    # set COVEL_OIDC_AUDIENCE to it) or the access token (when the issuer gives JWT access tokens for the API).
    web_oidc_token: Literal["id_token", "access_token"] = "id_token"

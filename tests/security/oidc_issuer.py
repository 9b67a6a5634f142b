"""A real OIDC issuer on 127.0.0.1 for the principal tests: discovery, a JWKS, tokens it signs, and the authorization
code flow with PKCE a page signs in with (its login page signs in `login_as` at once: the player's part at the issuer)."""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

AUDIENCE = "covel-tests"


def new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


class Issuer:
    """Serves /.well-known/openid-configuration and /jwks.json; `token()` signs JWTs with its key."""

    def __init__(self) -> None:
        self.key = new_key()
        self.kid = "key-1"
        self.jwks_fetches = 0
        # Cleared: /jwks.json stalls until it is set again.
        self.released = threading.Event()
        self.released.set()
        # The code flow: who signs in at the issuer's page, and the codes it gave (code -> (challenge, client, redirect)).
        self.login_as = "olivia"
        self.codes: dict[str, tuple[str, str, str]] = {}
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                if self.path == "/jwks.json":
                    issuer.jwks_fetches += 1
                    # A stalled issuer: the request hangs until released (or 30 s).
                    issuer.released.wait(30)
                    jwk = {**RSAAlgorithm.to_jwk(issuer.key.public_key(), as_dict=True), "kid": issuer.kid, "alg": "RS256", "use": "sig"}
                    self._json({"keys": [jwk]})
                elif self.path == "/.well-known/openid-configuration":
                    self._json({"issuer": issuer.url, "jwks_uri": f"{issuer.url}/jwks.json", "authorization_endpoint": f"{issuer.url}/authorize",
                                "token_endpoint": f"{issuer.url}/token"})
                elif self.path.startswith("/authorize?"):
                    self._authorize(parse_qs(urlsplit(self.path).query))
                else:
                    self.send_error(404)

            def _authorize(self, query: dict[str, list[str]]) -> None:
                asked = {name: values[0] for name, values in query.items()}
                if asked.get("response_type") != "code" or asked.get("code_challenge_method") != "S256" or not asked.get("code_challenge"):
                    self._json({"error": "invalid_request"}, 400)
                    return
                code = secrets.token_urlsafe(16)
                issuer.codes[code] = (asked["code_challenge"], asked.get("client_id", ""), asked.get("redirect_uri", ""))
                self.send_response(302)
                self.send_header("Location", f"{asked['redirect_uri']}?{urlencode({'code': code, 'state': asked.get('state', '')})}")
                self.end_headers()

            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                if self.path != "/token":
                    self.send_error(404)
                    return
                form = {name: values[0] for name, values in parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode()).items()}
                challenge, client_id, redirect = issuer.codes.pop(form.get("code", ""), ("", "", ""))
                verified = base64.urlsafe_b64encode(hashlib.sha256(form.get("code_verifier", "").encode()).digest()).rstrip(b"=").decode()
                if not challenge or verified != challenge or form.get("client_id") != client_id or form.get("redirect_uri") != redirect:
                    self._json({"error": "invalid_grant", "error_description": "the code, its verifier or its client does not match"}, 400)
                    return
                self._json({"id_token": issuer.token(issuer.login_as, audience=client_id), "access_token": secrets.token_urlsafe(8),
                            "token_type": "Bearer"})

            def _json(self, document: dict[str, Any], status: int = 200) -> None:
                body = json.dumps(document).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self._server.server_port}"

    def token(self, sub: str, *, roles: list[str] | None = None, audience: str = AUDIENCE, expires_in: float = 300,
              key: rsa.RSAPrivateKey | None = None, kid: str | None = None, **claims: Any) -> str:
        now = int(time.time())
        payload = {"iss": self.url, "sub": sub, "aud": audience, "iat": now, "exp": now + int(expires_in), **claims}
        if roles is not None:
            payload["roles"] = roles
        return jwt.encode(payload, key or self.key, algorithm="RS256", headers={"kid": kid or self.kid})

    def close(self) -> None:
        self.released.set()
        self._server.shutdown()
        self._server.server_close()

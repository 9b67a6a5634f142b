"""A real OIDC issuer on 127.0.0.1 for the principal tests: discovery, a JWKS, tokens it signs."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

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
                    self._json({"issuer": issuer.url, "jwks_uri": f"{issuer.url}/jwks.json"})
                else:
                    self.send_error(404)

            def _json(self, document: dict[str, Any]) -> None:
                body = json.dumps(document).encode()
                self.send_response(200)
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

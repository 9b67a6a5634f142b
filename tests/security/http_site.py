"""A real HTTP server on 127.0.0.1 for covel.http tests (`/redirect?to=URL`, `/big?bytes=N`,
`/host`: its Host header, else the request as JSON)."""

from __future__ import annotations

import errno
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def _bound(port: int, handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
    """The server on `port`. A fixed port (named in a fixture plugin's manifest) may be, for a moment, the local end
    of another test's connection (an ephemeral port): bind again for a few seconds before giving up."""
    for attempt in range(50):
        try:
            return ThreadingHTTPServer(("127.0.0.1", port), handler)
        except OSError as error:
            if error.errno != errno.EADDRINUSE or not port or attempt == 49:
                raise
            time.sleep(0.2)
    raise AssertionError("unreachable")


class Site:
    """A real HTTP server on 127.0.0.1 that records what reached it."""

    def __init__(self, port: int = 0) -> None:
        self.seen: list[tuple[str, str]] = []
        site = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                site.seen.append((self.command, self.path))
                if self.path.startswith("/redirect?to="):
                    self.send_response(302)
                    self.send_header("Location", self.path.removeprefix("/redirect?to="))
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if self.path.startswith("/big?bytes="):
                    size = int(self.path.removeprefix("/big?bytes="))
                    self.send_response(200)
                    self.send_header("Content-Length", str(size))
                    self.end_headers()
                    self.wfile.write(b"x" * size)
                    return
                answer = {"host": self.headers.get("Host")} if self.path == "/host" else {"method": self.command, "path": self.path}
                body = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_DELETE = _answer  # noqa: N815 (http.server's names)

            def log_message(self, *args) -> None:
                pass

        self._server = _bound(port, Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        self.origin = f"http://127.0.0.1:{self._server.server_port}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

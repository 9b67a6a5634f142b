"""`python -m services.web`: run the web front (the player page and the HTTP/JSON API) until SIGTERM."""

from __future__ import annotations

import asyncio
import socket
import sys

import uvicorn

from services.web.app import create_app
from services.web.oidc_login import OidcLogin
from services.web.settings import WebSettings
from shared.grpc_server import EXIT_ADDRESS_IN_USE
from shared.logs import configure_logging, get_logger
from shared.telemetry import metrics


def _bound_socket(addr: str) -> socket.socket:
    host, _, port = addr.rpartition(":")
    sock = socket.socket(socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host.strip("[]") or "0.0.0.0", int(port)))
    sock.listen(128)
    return sock


async def _serve(settings: WebSettings, sock: socket.socket) -> None:
    def ready() -> None:
        # The socket is bound and listening already: connections wait in its backlog until uvicorn accepts.
        print(f"COVEL_READY web {sock.getsockname()[1]}", file=sys.stderr, flush=True)

    login = OidcLogin(settings.oidc_issuer, settings.web_oidc_client_id, settings.web_oidc_scope, settings.web_oidc_token) \
        if settings.oidc_issuer and settings.web_oidc_client_id else None
    app = create_app(settings.scheduler_addr, security=settings, timeout_s=settings.web_call_timeout_s, on_ready=ready, login=login)
    server = uvicorn.Server(uvicorn.Config(app, log_level=settings.log_level, access_log=False, lifespan="on",
                                           timeout_graceful_shutdown=int(settings.shutdown_grace_s)))
    await server.serve(sockets=[sock])


def main() -> None:
    settings = WebSettings()
    configure_logging("web", settings.log_level, settings.log_format)
    # /metrics on COVEL_METRICS_PORT (COVEL_WEB_METRICS_PORT), as the other services.
    metrics.start_metrics_server("web", settings, settings.web_addr.rpartition(":")[0] or "127.0.0.1")
    try:
        sock = _bound_socket(settings.web_addr)
    except OSError as error:
        # As a gRPC service says it (shared/grpc_server.run_service), so a supervisor reads it the same way.
        why = f"could not bind {settings.web_addr}: cannot listen on it ({error.strerror or error})"
        get_logger().error("service.bind_failed", error=why)
        print(why, file=sys.stderr, flush=True)
        sys.exit(EXIT_ADDRESS_IN_USE)
    asyncio.run(_serve(settings, sock))


if __name__ == "__main__":
    main()

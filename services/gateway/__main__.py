"""`python -m services.gateway`: run the LLM gateway until SIGTERM."""

from __future__ import annotations

from services.gateway.server import start
from services.gateway.settings import GatewaySettings
from shared.grpc_server import run_service, serve_until_signalled
from shared.logs import configure_logging


async def _run() -> None:
    settings = GatewaySettings()
    configure_logging("gateway", settings.log_level, settings.log_format)
    running = await start(settings)
    await serve_until_signalled(running, "gateway", settings.shutdown_grace_s)


def main() -> None:
    run_service(_run)


if __name__ == "__main__":
    main()

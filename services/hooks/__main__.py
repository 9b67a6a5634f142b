"""`python -m services.hooks`: run the hook dispatcher."""


from services.hooks.server import start
from services.hooks.settings import HooksSettings
from shared.grpc_server import run_service, serve_until_signalled
from shared.logs import configure_logging


async def main() -> None:
    settings = HooksSettings()
    configure_logging("hooks", settings.log_level, settings.log_format)
    running = await start(settings)
    await serve_until_signalled(running, "hooks", settings.shutdown_grace_s)


if __name__ == "__main__":
    run_service(main)

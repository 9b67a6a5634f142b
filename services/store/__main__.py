"""`python -m services.store`: run the transactional store."""


from services.store.server import start, wait_closed
from services.store.settings import StoreSettings
from shared.grpc_server import run_service, serve_until_signalled
from shared.logs import configure_logging


async def main() -> None:
    settings = StoreSettings()
    configure_logging("store", settings.log_level, settings.log_format)
    running = await start(settings)
    await serve_until_signalled(running, "store", settings.shutdown_grace_s)
    await wait_closed()


if __name__ == "__main__":
    run_service(main)

"""`python -m services.store`: run the transactional store."""

import sys

from services.store.server import SchemaNotMigrated, start, wait_closed
from services.store.settings import StoreSettings
from shared.grpc_server import run_service, serve_until_signalled
from shared.logs import configure_logging, get_logger

# The exit status of a store whose database is not at its schema (COVEL_STORE_MIGRATE=check).
EXIT_NOT_MIGRATED = 3


async def main() -> None:
    settings = StoreSettings()
    configure_logging("store", settings.log_level, settings.log_format)
    try:
        running = await start(settings)
    except SchemaNotMigrated as error:
        get_logger().error("database.not_migrated", error=str(error))
        print(f"covel store: {error}", file=sys.stderr, flush=True)
        raise SystemExit(EXIT_NOT_MIGRATED) from None
    await serve_until_signalled(running, "store", settings.shutdown_grace_s)
    await wait_closed()


if __name__ == "__main__":
    run_service(main)

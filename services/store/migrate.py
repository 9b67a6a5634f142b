"""`python -m services.store.migrate` (`covel-service store-migrate`): bring the store's database to its
schema and exit. Kubernetes runs it as the store's init container, so the store itself only checks
(COVEL_STORE_MIGRATE=check); replicas migrating at once take turns under an advisory lock (PostgreSQL)."""

from __future__ import annotations

import sys

from services.store.database import create_store_engine, migrate, schema_revisions
from services.store.settings import StoreSettings
from shared.logs import configure_logging, get_logger


def main() -> int:
    settings = StoreSettings()
    configure_logging("store-migrate", settings.log_level, settings.log_format)
    engine = create_store_engine(settings.database_url(), schema=settings.store_database_schema, pool_size=1,
                                 lock_timeout_ms=settings.store_lock_timeout_ms)
    try:
        before, head = schema_revisions(engine)
        migrate(engine, schema=settings.store_database_schema)
    except Exception as error:  # the database unreachable or refusing: one clear line, a failed init container
        print(f"covel store-migrate: {type(error).__name__}: {error}", file=sys.stderr, flush=True)
        return 1
    finally:
        engine.dispose()
    get_logger().info("database.migrated", before=before or "(empty)", revision=head)
    print(f"covel store-migrate: the database is at schema revision {head} (was {before or 'empty'})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

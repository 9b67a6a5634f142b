"""Settings of the store service (COVEL_ environment variables)."""

from __future__ import annotations

import re

from pydantic import field_validator

from shared.settings import DataDirSetting, ServiceSettings

SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


class StoreSettings(ServiceSettings, DataDirSetting):
    # SQLAlchemy URL. Empty: a SQLite file `<COVEL_DATA_DIR>/covel.db` (the folder is created).
    # PostgreSQL: `postgresql+psycopg://user@host:5432/db`.
    store_database_url: str = ""
    # PostgreSQL only: keep every table in this schema (created if missing), e.g. one per
    # deployment or per test run. Empty: the connection's default search_path.
    store_database_schema: str = ""
    # Connections kept open to the database (and threads running queries).
    store_pool_size: int = 8
    # How long a write waits for a lock another writer holds before answering UNAVAILABLE
    # (SQLite: busy_timeout; PostgreSQL: lock_timeout).
    store_lock_timeout_ms: int = 10_000
    # Lease time-to-live when AcquireTurnLease/RenewTurnLease pass ttl_ms = 0.
    store_default_lease_ttl_ms: int = 60_000

    @field_validator("store_database_schema")
    @classmethod
    def _schema_name(cls, value: str) -> str:
        if value and not SCHEMA_NAME.match(value):
            raise ValueError("use lower-case letters, digits and _ (at most 63), starting with a letter or _")
        return value

    def database_url(self) -> str:
        """The configured URL, or the default SQLite file (its folder created on the way)."""
        if self.store_database_url:
            return self.store_database_url
        self.data_dir.mkdir(parents=True, exist_ok=True)
        return f"sqlite:///{(self.data_dir / 'covel.db').resolve()}"

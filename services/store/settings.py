"""Settings of the store service (COVEL_ environment variables)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator

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
    # On start, every turn lease is cut to end at most this long from now: a holder that died with the
    # store (or while it was down) no longer blocks its session for the rest of a long lease, while a live
    # one renews within this (schedulers retry a failed renewal every quarter of their renewal interval).
    store_restart_lease_grace_ms: int = Field(default=3_000, ge=0)
    # on-start: the store migrates the database to its schema when it starts (one machine, `covel up`).
    # check: it only checks the database is at its schema and refuses to start otherwise; the migration
    # runs apart, before it (`covel-service store-migrate`, the init container in deploy/k8s).
    store_migrate: Literal["on-start", "check"] = "on-start"
    # Readiness: how often the store checks the database answers (its health is NOT_SERVING while not).
    store_readiness_interval_s: float = Field(default=5.0, gt=0)
    # Detached jobs that fail for a passing reason (a peer unavailable, their worker gone) are queued
    # again after retry_base_ms, doubling up to retry_max_ms, until max_attempts; then parked.
    store_detached_max_attempts: int = Field(default=5, ge=1, le=100)
    store_detached_retry_base_ms: int = Field(default=1_000, ge=0)
    store_detached_retry_max_ms: int = Field(default=60_000, ge=0)
    # Back-pressure: a turn does not start while its session has this many detached jobs queued or
    # running, or the whole queue this many queued; it waits (up to its lease wait), then RESOURCE_EXHAUSTED.
    store_detached_max_per_session: int = Field(default=16, ge=1)
    store_detached_max_total: int = Field(default=2_000, ge=1)

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

"""A real store server per test module, once on SQLite (a temp file) and once on PostgreSQL.

PostgreSQL runs get a schema of their own (`covel_test_<random>`), dropped afterwards, so
parallel runs and leftovers never collide.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest
import pytest_asyncio
from sqlalchemy import create_engine, text
from sqlalchemy.exc import OperationalError

from covel.store.v1 import store_pb2_grpc
from services.store.server import start, wait_closed
from services.store.settings import StoreSettings
from shared.grpc_server import RunningServer
from tests.conftest import POSTGRES_URL, free_addr
from tests.support.identities import bare_channel_as, service_tls

BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def postgres_reachable() -> str | None:
    try:
        engine = create_engine(POSTGRES_URL)
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
        engine.dispose()
        return None
    except OperationalError as error:
        return f"PostgreSQL at {POSTGRES_URL} is not reachable: {error.orig}"


def drop_schema(schema: str) -> None:
    engine = create_engine(POSTGRES_URL)
    with engine.begin() as connection:
        connection.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
    engine.dispose()


@dataclass
class StoreUnderTest:
    settings: StoreSettings
    running: RunningServer | None = None
    channel: grpc.aio.Channel | None = None
    stub: store_pb2_grpc.TransactionalStoreStub = field(init=False)

    async def start(self) -> None:
        # The store's own certificate (shared/security/service_identity.py).
        self.settings = self.settings.model_copy(update={"store_addr": free_addr(), **service_tls("store")})
        self.running = await start(self.settings)
        # As the scheduler: the store's only caller (shared/security/policy.py).
        self.channel = bare_channel_as(self.settings.store_addr, "scheduler")
        self.stub = store_pb2_grpc.TransactionalStoreStub(self.channel)

    async def stop(self) -> None:
        if self.channel is not None:
            await self.channel.close()
        if self.running is not None:
            await self.running.stop(1.0)
            await wait_closed()
        self.channel = self.running = None

    async def restart(self) -> None:
        await self.stop()
        await self.start()


def settings_for(backend: str, tmp_dir: Any) -> tuple[StoreSettings, str]:
    if backend == "sqlite":
        return StoreSettings(data_dir=tmp_dir, store_pool_size=4), ""
    schema = f"covel_test_{uuid.uuid4().hex[:12]}"
    return StoreSettings(data_dir=tmp_dir, store_database_url=POSTGRES_URL, store_database_schema=schema, store_pool_size=4), schema


@pytest_asyncio.fixture(scope="module", loop_scope="session", params=BACKENDS)
async def store(request, tmp_path_factory) -> AsyncIterator[StoreUnderTest]:
    if request.param == "postgres" and (reason := postgres_reachable()):
        pytest.skip(reason)
    settings, schema = settings_for(request.param, tmp_path_factory.mktemp("store"))
    # A test module may set STORE_SETTINGS (field -> value) for a store of its own kind.
    under_test = StoreUnderTest(settings.model_copy(update=getattr(request.module, "STORE_SETTINGS", {})))
    try:
        await under_test.start()
        yield under_test
    finally:
        await under_test.stop()
        if schema:
            drop_schema(schema)


@pytest.fixture
def stub(store: StoreUnderTest) -> store_pb2_grpc.TransactionalStoreStub:
    return store.stub


@pytest_asyncio.fixture(loop_scope="session")
async def hooks(store: StoreUnderTest) -> AsyncIterator[store_pb2_grpc.TransactionalStoreStub]:
    """The store as the hooks service reaches it (RecordPluginFaults, AccessHookState are its calls alone)."""
    async with bare_channel_as(store.settings.store_addr, "hooks") as channel:
        yield store_pb2_grpc.TransactionalStoreStub(channel)

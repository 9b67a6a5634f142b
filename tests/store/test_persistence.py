"""Durability and schema: data survives a restart; migrations build exactly the models' schema."""

from __future__ import annotations

import asyncio
import time

import grpc
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import select, text

from covel.store.v1 import store_pb2
from services.store.database import WRITE, alembic_config, create_store_engine, migrate
from services.store.models import Base, SessionRow
from shared.structs import from_value
from tests.store.conftest import StoreUnderTest, drop_schema
from tests.store.helpers import (
    acquire,
    commit,
    data_proposal,
    expect_error,
    new_session,
    play_turn,
    story_proposal,
    story_result,
    turn_for,
)


async def test_data_survives_a_restart_on_the_same_database(store):
    stub = store.stub
    session = await new_session(stub, title="Kept")
    played = (await play_turn(stub, session.id, "Remembered.", idempotency_key="before-restart")).turn
    lease = (await acquire(stub, session.id)).lease
    await commit(stub, lease, turn_for(lease), [data_proposal("notes", "k", {"v": 1})])
    held = (await acquire(stub, session.id, ttl_ms=60_000)).lease

    await store.restart()
    stub = store.stub

    reloaded = (await stub.GetSession(store_pb2.GetSessionRequest(session_id=session.id))).session
    assert reloaded.title == "Kept" and reloaded.completed_player_turns == 2
    messages = (await stub.ListMessages(store_pb2.ListMessagesRequest(session_id=session.id))).messages
    assert [m.seq for m in messages] == [1, 2, 3]
    assert (await stub.GetTurn(store_pb2.GetTurnRequest(session_id=session.id, turn_id=played.id))).turn == played
    entries = (await stub.ListPluginData(store_pb2.ListPluginDataRequest(session_id=session.id))).entries
    assert [from_value(e.value) for e in entries] == [{"v": 1}]
    assert (await acquire(stub, session.id, idempotency_key="before-restart")).existing_turn.id == played.id
    # A lease survives the restart too: the holder can still commit.
    await expect_error(grpc.StatusCode.ABORTED, acquire(stub, session.id))
    reply = await commit(stub, held, turn_for(held, runtime_results=[story_result()]), [story_proposal("After.")])
    assert [m.seq for m in reply.turn.messages] == [4, 5]


async def test_a_restart_cuts_long_leases_so_a_dead_holder_blocks_its_session_briefly(store):
    """A holder that died with the store leaves a lease the restarted store ends within its grace; a live one renews."""
    session, busy = await new_session(store.stub), await new_session(store.stub)
    dead = (await acquire(store.stub, session.id, holder="died-with-the-store", ttl_ms=600_000)).lease
    live = (await acquire(store.stub, busy.id, holder="still-running", ttl_ms=600_000)).lease
    grace = store.settings.store_restart_lease_grace_ms
    store.settings = store.settings.model_copy(update={"store_restart_lease_grace_ms": 400})
    try:
        await store.restart()
    finally:
        store.settings = store.settings.model_copy(update={"store_restart_lease_grace_ms": grace})
    stub = store.stub
    renewed = (await stub.RenewTurnLease(store_pb2.RenewTurnLeaseRequest(session_id=busy.id, lease_id=live.lease_id, ttl_ms=600_000))).lease
    started = time.monotonic()
    taken = (await acquire(stub, session.id, holder="next", wait_ms=5_000)).lease
    assert taken.lease_id != dead.lease_id and time.monotonic() - started < 2.0
    await asyncio.sleep(0.5)
    # The live holder renewed after the restart: nobody takes its session.
    await expect_error(grpc.StatusCode.ABORTED, acquire(stub, busy.id, holder="next"))
    assert renewed.deadline.ToMilliseconds() - renewed.acquired_at.ToMilliseconds() > 500_000


async def test_concurrent_turns_in_many_sessions_keep_every_log_contiguous(stub):
    sessions = [await new_session(stub) for _ in range(6)]

    async def play(session_id: str) -> None:
        for number in range(4):
            await play_turn(stub, session_id, f"story {number}")

    await asyncio.gather(*(play(session.id) for session in sessions))
    for session in sessions:
        messages = (await stub.ListMessages(store_pb2.ListMessagesRequest(session_id=session.id))).messages
        assert [m.seq for m in messages] == list(range(1, 9))


def test_migrations_build_the_models_schema_and_are_idempotent(store):
    settings = store.settings
    engine = create_store_engine(settings.database_url(), schema=settings.store_database_schema, pool_size=1)
    try:
        migrate(engine, schema=settings.store_database_schema)  # already at head: nothing to do
        with engine.connect() as connection:
            context = MigrationContext.configure(connection)
            assert context.get_current_revision() == ScriptDirectory.from_config(alembic_config()).get_current_head()
            assert compare_metadata(context, Base.metadata) == []
    finally:
        engine.dispose()


async def test_a_write_stuck_behind_a_lock_is_unavailable(store):
    """A writer that cannot get the lock in store_lock_timeout_ms answers UNAVAILABLE (retryable)."""
    session = await new_session(store.stub)
    impatient = StoreUnderTest(store.settings.model_copy(update={"store_lock_timeout_ms": 200}))
    settings = store.settings
    engine = create_store_engine(settings.database_url(), schema=settings.store_database_schema, pool_size=1)
    await impatient.start()
    try:
        with engine.connect().execution_options(**{WRITE: True}) as blocker, blocker.begin():
            blocker.execute(select(SessionRow).where(SessionRow.id == session.id).with_for_update())
            error = await expect_error(grpc.StatusCode.UNAVAILABLE, acquire(impatient.stub, session.id))
            assert "retry" in error.details()
        assert (await acquire(impatient.stub, session.id)).HasField("lease")
    finally:
        await impatient.stop()
        engine.dispose()


def test_sessions_from_before_owners_get_none(store, tmp_path):
    """Migration 0007 on a database with sessions: they get owner "" (only operators reach them)."""
    settings = store.settings
    if settings.store_database_schema:
        schema = settings.store_database_schema + "_owner"
        url = settings.database_url()
    else:
        schema, url = "", f"sqlite:///{tmp_path / 'old.db'}"
    engine = create_store_engine(url, schema=schema, pool_size=1)
    try:
        migrate(engine, revision="0006_turn_trace_ids", schema=schema)
        with engine.begin() as connection:
            connection.execute(text(
                "INSERT INTO sessions (id, status, phase, locale, world_id, title, active_plugins, requested_plugins, excluded_plugins,"
                " approved_plugins, runtime_model_overrides, plugin_settings, completed_player_turns, last_message_seq, recorded_turns,"
                " created_at, updated_at) VALUES ('old', 'active', 'playing', 'en', '', '', '[]', '[]', '[]', '[]', '{}', '{}', 0, 0, 0,"
                " CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
            ))
        migrate(engine, schema=schema)
        with engine.connect() as connection:
            assert connection.execute(select(SessionRow.owner).where(SessionRow.id == "old")).scalar_one() == ""
    finally:
        engine.dispose()
        if schema:
            drop_schema(schema)


async def test_with_migrate_check_the_store_refuses_a_database_not_at_its_schema(tmp_path, monkeypatch):
    """Kubernetes migrates in the store's init container (`covel-service store-migrate`); the store only checks."""
    from services.store.migrate import main as migrate_main
    from services.store.server import SchemaNotMigrated, start
    from services.store.settings import StoreSettings
    from tests.conftest import free_addr
    from tests.support.identities import service_tls

    settings = StoreSettings(data_dir=tmp_path, store_addr=free_addr(), store_migrate="check", **service_tls("store"))
    try:
        await start(settings)
    except SchemaNotMigrated as error:
        refused = str(error)
    else:
        raise AssertionError("a store in check mode started on an empty database")
    assert "schema revision (none)" in refused and "covel-service store-migrate" in refused
    monkeypatch.setenv("COVEL_DATA_DIR", str(tmp_path))
    assert migrate_main() == 0
    running = await start(settings)
    await running.stop(0)

"""Writers and the database's locks: one SQLite writer that never sleeps on the lock, PostgreSQL
writers of different sessions side by side, and detached-job polls that do not take the lock."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator

import psycopg
import pytest
import pytest_asyncio
from sqlalchemy.engine import make_url

from bench.store_commit import LockWaitMeter
from covel.store.v1 import store_pb2
from services.store import leases, sessions
from services.store.database import Database
from services.store.server import open_database
from services.store.settings import StoreSettings
from services.store.turn_commit import commit_turn
from shared.structs import to_struct
from tests.store.conftest import BACKENDS, drop_schema, postgres_reachable, settings_for
from tests.store.helpers import commit_turn as commit_turn_rpc
from tests.store.helpers import data_proposal, new_session, story_proposal, story_result

SESSIONS = 16
TURNS_EACH = 3


@contextlib.contextmanager
def foreign_lock(settings: StoreSettings, statement: str) -> Iterator[None]:
    """Another connection holding a lock: SQLite's write lock, or what `statement` locks on PostgreSQL."""
    url = make_url(settings.database_url())
    if url.get_backend_name() == "sqlite":
        connection = sqlite3.connect(url.database, isolation_level=None, check_same_thread=False)
        connection.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            connection.execute("ROLLBACK")
            connection.close()
        return
    with psycopg.connect(url.set(drivername="postgresql").render_as_string(hide_password=False)) as connection:
        connection.execute(f'SET search_path TO "{settings.store_database_schema}"')
        connection.execute(statement)
        try:
            yield
        finally:
            connection.rollback()


@pytest_asyncio.fixture(params=BACKENDS)
async def database(request, tmp_path) -> AsyncIterator[tuple[Database, StoreSettings]]:
    if request.param == "postgres" and (reason := postgres_reachable()):
        pytest.skip(reason)
    settings, schema = settings_for(request.param, tmp_path)
    opened = await open_database(settings)
    try:
        yield opened, settings
    finally:
        await opened.close()
        if schema:
            drop_schema(schema)


async def play(database: Database, session_id: str, turns: int, writers: set[str]) -> None:
    def observed(db, request):
        writers.add(threading.current_thread().name)
        return commit_turn(db, request)

    for number in range(turns):
        lease = (await database.write(leases.try_acquire, session_id, "test", 30_000, "")).lease
        turn = store_pb2.Turn(id=lease.turn_id, session_id=session_id, status=store_pb2.TURN_STATUS_COMMITTED, origin="player",
                              player_message=f"step {number}", runtime_results=[story_result()])
        proposals = [story_proposal(f"Turn {number}."), data_proposal("notes", f"key-{number}", {"n": number})]
        request = store_pb2.CommitTurnRequest(session_id=session_id, lease_id=lease.lease_id, turn=turn, proposals=proposals, release_lease=True)
        reply = await database.write(observed, request)
        assert reply.turn.status == store_pb2.TURN_STATUS_COMMITTED, reply.turn.abort_reason


async def test_concurrent_sessions_write_without_waiting_for_each_others_locks(database):
    """SQLite: every write in one thread, so no write waits in SQLite's busy handler for another
    of this process. PostgreSQL: a pool of writers, each locking only its own session's row."""
    db, _settings = database
    created = [await db.write(sessions.create_session, store_pb2.Session(phase="playing", locale="en")) for _ in range(SESSIONS)]
    writers: set[str] = set()
    await asyncio.gather(*(play(db, session.id, TURNS_EACH, writers) for session in created))
    if db.dialect == "sqlite":
        assert writers == {"store-writer_0"}
    else:
        assert len(writers) > 1
    for session in created:
        stored = await db.read(sessions.get_session, session.id)
        assert stored.completed_player_turns == TURNS_EACH
        listed = await db.read(sessions.list_messages, store_pb2.ListMessagesRequest(session_id=session.id))
        assert len(listed.messages) == 2 * TURNS_EACH


async def test_the_bench_measures_a_write_waiting_for_another_connections_lock(database):
    db, settings = database
    session = await db.write(sessions.create_session, store_pb2.Session(phase="playing", locale="en"))
    lease = (await db.write(leases.try_acquire, session.id, "test", 30_000, "")).lease
    meter = LockWaitMeter(db.engine)
    try:
        with foreign_lock(settings, f"SELECT id FROM sessions WHERE id = '{session.id}' FOR UPDATE"):
            renewing = asyncio.ensure_future(db.write(leases.renew, session.id, lease.lease_id, 30_000))
            await asyncio.sleep(0.3)
            assert not renewing.done()
        await renewing
    finally:
        meter.close()
    assert meter.locks == 1 and meter.longest_s >= 0.2


async def claim(stub, **fields) -> store_pb2.DetachedJob | None:
    reply = await stub.ClaimDetachedJob(store_pb2.ClaimDetachedJobRequest(holder="worker-1", lease_ttl_ms=10_000, **fields), timeout=5)
    return reply.job if reply.HasField("job") else None


async def test_idle_detached_job_polls_answer_without_the_write_lock(store, stub):
    """A poll with nothing to claim is a read: it answers at once while another connection holds
    the lock a write would wait for (SQLite: the write lock; PostgreSQL: the jobs table)."""
    session = await new_session(stub)
    lock_jobs = "LOCK TABLE detached_jobs IN EXCLUSIVE MODE"
    with foreign_lock(store.settings, lock_jobs):
        started = time.monotonic()
        assert await claim(stub) is None
        assert await claim(stub, session_id=session.id) is None
        assert time.monotonic() - started < 2
    spec = store_pb2.DetachedJobSpec(plugin_id="memory", runtime_id="summarize", input=to_struct({"turn": "snapshot"}))
    [first] = (await commit_turn_rpc(stub, session.id, detached_jobs=[spec])).enqueued_jobs
    [second] = (await commit_turn_rpc(stub, session.id, detached_jobs=[spec])).enqueued_jobs
    claimed = await claim(stub)
    assert claimed is not None and claimed.id == first.id
    # The second job waits for its runtime's running one: nothing claimable, the poll stays a read.
    with foreign_lock(store.settings, lock_jobs):
        assert await claim(stub, session_id=session.id) is None
    await stub.CompleteDetachedJob(store_pb2.CompleteDetachedJobRequest(job_id=claimed.id, lease_id=claimed.lease_id, status="succeeded"))
    assert (await claim(stub, session_id=session.id)).id == second.id


async def test_a_poll_sweeps_what_expired_even_with_nothing_to_claim(stub):
    session = await new_session(stub)
    spec = store_pb2.DetachedJobSpec(plugin_id="memory", runtime_id=f"late-{uuid.uuid4().hex[:6]}", max_queue_ms=20)
    await commit_turn_rpc(stub, session.id, detached_jobs=[spec])
    await asyncio.sleep(0.05)
    assert await claim(stub, session_id=session.id) is None
    [late] = (await stub.ListDetachedJobs(store_pb2.ListDetachedJobsRequest(session_id=session.id))).jobs
    assert late.status == "timed-out" and "maxQueueMs" in late.error

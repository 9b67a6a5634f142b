"""Engine, connections and migrations: SQLite (WAL, busy timeout) or PostgreSQL (psycopg 3).

The engine is synchronous; the service runs each unit of work in a thread of its own
pool (`Database.read` / `Database.write`), so the event loop never blocks on the database.

Write transactions serialise per session:
- SQLite: one database-wide write lock, so the store runs every write in one thread of its
  own, one after another (readers keep their pool and read during writes: WAL). Writers in
  a pool would sleep in SQLite's busy handler (backing off up to 100 ms a try) instead of
  queueing; one writer never waits for a lock held inside this process. A write transaction
  still starts with `BEGIN IMMEDIATE` (another process holding the lock: busy_timeout).
- PostgreSQL: writes run in the pool; a write locks the session row (`SELECT ... FOR UPDATE`,
  see `lock_session`), so writes to different sessions run side by side.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar, cast

from alembic import command
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, Table, bindparam, create_engine, event, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from services.store.models import SessionRow
from services.store.vector_extension import load_sqlite_vec, log_vector_method
from shared.errors import session_not_found, unavailable
from shared.logs import get_logger

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
# Any constant: store replicas starting together run migrations one at a time.
MIGRATION_LOCK_KEY = 0x636F76656C  # "covel"
WRITE = "covel_write"

T = TypeVar("T")
log = get_logger(component="database")


def create_store_engine(url: str, *, schema: str = "", pool_size: int = 8, lock_timeout_ms: int = 10_000) -> Engine:
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        if parsed.database in (None, "", ":memory:"):
            raise ValueError("the store needs a SQLite file (an in-memory database is private to one connection)")
        if schema:
            raise ValueError("store_database_schema applies to PostgreSQL only")
        _private_file(Path(parsed.database))
        engine = create_engine(
            parsed, pool_size=pool_size, max_overflow=0, connect_args={"check_same_thread": False}
        )
        _sqlite_events(engine, lock_timeout_ms)
    elif backend == "postgresql":
        if parsed.drivername != "postgresql+psycopg":
            raise ValueError(f"use the psycopg 3 driver: postgresql+psycopg://… (got {parsed.drivername})")
        engine = create_engine(parsed, pool_size=pool_size, max_overflow=2, pool_pre_ping=True)
        _pg_session(engine, schema, lock_timeout_ms)
    else:
        raise ValueError(f"unsupported database {backend!r}: use sqlite:///path or postgresql+psycopg://…")
    return engine


def _private_file(path: Path) -> None:
    """The SQLite file 0600 in a folder 0700 (its journals take the file's mode): plugin code in the
    sandbox, or another user, cannot read it (docs/security.md, "Plugin sandbox"). A folder this
    user does not own (a mounted volume) keeps its mode."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with contextlib.suppress(PermissionError):
        path.parent.chmod(0o700)
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    path.chmod(0o600)


def _sqlite_events(engine: Engine, busy_timeout_ms: int) -> None:
    @event.listens_for(engine, "connect")
    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy (not the driver) issue BEGIN, so we choose DEFERRED or IMMEDIATE.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.close()
        # memory-search's vector distance, where this Python can load it (services/store/vector_extension.py).
        load_sqlite_vec(dbapi_connection)

    @event.listens_for(engine, "begin")
    def on_begin(connection: Any) -> None:
        immediate = connection.get_execution_options().get(WRITE, False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def _pg_session(engine: Engine, schema: str, lock_timeout_ms: int) -> None:
    @event.listens_for(engine, "connect")
    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        with dbapi_connection.cursor() as cursor:
            cursor.execute(f"SET lock_timeout = {int(lock_timeout_ms)}")
            if schema:
                # migrate() creates the schema; a search_path may name one that does not exist yet.
                cursor.execute(f'SET search_path TO "{schema}"')
        dbapi_connection.commit()


def alembic_config(connection: Any | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def migrate(engine: Engine, revision: str = "head", schema: str = "") -> None:
    """Bring the database to `revision` in one transaction (an empty database gets every table)."""
    with engine.connect().execution_options(**{WRITE: True}) as connection, connection.begin():
        if engine.dialect.name == "postgresql":
            # Replicas starting together: one migrates, the others wait and then find it done.
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
            if schema:
                connection.execute(text(f'CREATE SCHEMA IF NOT EXISTS "{schema}"'))
        command.upgrade(alembic_config(connection), revision)


def schema_revisions(engine: Engine) -> tuple[str | None, str]:
    """(the database's alembic revision, None when it has none; the newest this store knows)."""
    with engine.connect() as connection:
        current = MigrationContext.configure(connection).get_current_revision()
    return current, ScriptDirectory.from_config(alembic_config()).get_current_head() or ""


def lock_session(db: Session, session_id: str) -> SessionRow:
    """The session row, locked for this write transaction (PostgreSQL); NOT_FOUND if missing."""
    statement = select(SessionRow).where(SessionRow.id == session_id)
    if db.get_bind().dialect.name == "postgresql":
        statement = statement.with_for_update()
    row = db.execute(statement).scalar_one_or_none()
    if row is None:
        raise session_not_found(session_id)
    return row


def read_locked_session(db: Session, session_id: str) -> SessionRow:
    """lock_session read with Core: a transient row, outside the ORM session (the caller writes its
    changes with write_session). A commit reads and writes the session once; the ORM's identity
    map and unit of work cost more than the two statements."""
    connection = db.connection()
    statement = _SESSION_FOR_UPDATE if connection.dialect.name == "postgresql" else _SESSION
    found = connection.execute(statement, {"b_id": session_id}).one_or_none()
    if found is None:
        raise session_not_found(session_id)
    return SessionRow(**found._mapping)


def read_session(db: Session, session_id: str) -> SessionRow:
    """The session row read with Core, unlocked, as a transient row outside the ORM session (NOT_FOUND if missing):
    for reads that answer with the session; the ORM's get costs several times the statement."""
    found = db.connection().execute(_SESSION, {"b_id": session_id}).one_or_none()
    if found is None:
        raise session_not_found(session_id)
    return SessionRow(**found._mapping)


def require_session(db: Session, session_id: str) -> None:
    """NOT_FOUND unless the session exists: one column read with Core."""
    if db.connection().execute(_SESSION_ID, {"b_id": session_id}).first() is None:
        raise session_not_found(session_id)


def lock_session_id(db: Session, session_id: str) -> None:
    """lock_session for a unit that reads nothing of the session: one column read with Core (no row built);
    NOT_FOUND if missing. The lock is the same: the row `FOR UPDATE` on PostgreSQL, the write lock on SQLite."""
    connection = db.connection()
    statement = _SESSION_ID_FOR_UPDATE if connection.dialect.name == "postgresql" else _SESSION_ID
    if connection.execute(statement, {"b_id": session_id}).first() is None:
        raise session_not_found(session_id)


def write_session(db: Session, row: SessionRow, columns: tuple[str, ...]) -> None:
    db.connection().execute(_SESSION_UPDATE, {"b_id": row.id, **{name: getattr(row, name) for name in columns}})


# A declarative class with __tablename__ always maps a Table; DeclarativeBase types __table__ as any FromClause.
_SESSIONS = cast(Table, SessionRow.__table__)
# Built once: building a statement costs more than running it.
_SESSION = select(_SESSIONS).where(_SESSIONS.c.id == bindparam("b_id"))
_SESSION_FOR_UPDATE = _SESSION.with_for_update()
_SESSION_ID = select(_SESSIONS.c.id).where(_SESSIONS.c.id == bindparam("b_id"))
_SESSION_ID_FOR_UPDATE = _SESSION_ID.with_for_update()
_SESSION_UPDATE = _SESSIONS.update().where(_SESSIONS.c.id == bindparam("b_id"))


class Database:
    """Runs units of work in threads: `await db.write(fn, ...)` gives `fn` an open transaction.

    `single_writer` (default: on SQLite) runs every write in one thread, in the order asked."""

    def __init__(self, engine: Engine, pool_size: int, schema: str = "", single_writer: bool | None = None) -> None:
        self.engine = engine
        self.schema = schema
        self._reader = sessionmaker(engine, expire_on_commit=False)
        self._writer = sessionmaker(engine.execution_options(**{WRITE: True}), expire_on_commit=False)
        self._executor = ThreadPoolExecutor(max_workers=pool_size, thread_name_prefix="store-db")
        if single_writer is None:
            single_writer = engine.dialect.name == "sqlite"
        self._write_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="store-writer") if single_writer else self._executor
        # memory-search's ranking: "sqlite-vec" or "python" (services/store/vector_extension.py), logged once.
        self.vector_method = log_vector_method(engine)

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    async def read(self, work: Callable[..., T], *args: Any) -> T:
        return await self._run(self._executor, self._reader, work, args)

    async def write(self, work: Callable[..., T], *args: Any) -> T:
        return await self._run(self._write_executor, self._writer, work, args)

    async def _run(self, executor: ThreadPoolExecutor, factory: sessionmaker[Session], work: Callable[..., T], args: tuple[Any, ...]) -> T:
        def unit() -> T:
            try:
                with factory.begin() as db:
                    return work(db, *args)
            except OperationalError as error:
                # Lock timeouts (SQLite busy), lost connections, a database restarting: retryable.
                log.warning("database.unavailable", error=str(error.orig))
                raise unavailable(f"the store's database is unavailable, retry: {error.orig}") from error

        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(executor, functools.partial(unit))

    async def migrate(self) -> None:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._write_executor, functools.partial(migrate, self.engine, schema=self.schema))

    async def revisions(self) -> tuple[str | None, str]:
        return await asyncio.get_running_loop().run_in_executor(self._executor, schema_revisions, self.engine)

    async def ping(self) -> None:
        """One round trip to the database (readiness)."""
        def select_one() -> None:
            with self.engine.connect() as connection:
                connection.execute(text("SELECT 1"))

        await asyncio.get_running_loop().run_in_executor(self._executor, select_one)

    async def close(self) -> None:
        loop = asyncio.get_running_loop()
        # Behind the writes already queued.
        await loop.run_in_executor(self._write_executor, lambda: None)
        await loop.run_in_executor(self._executor, self.engine.dispose)
        self._write_executor.shutdown(wait=False)
        self._executor.shutdown(wait=False)

"""Which vector search the database offers memory-search (services/store/memory_vectors.py).

SQLite: the sqlite-vec extension (PyPI `sqlite-vec`), loaded into every connection when Python's
sqlite3 can load extensions (Debian's Python can; a Python built without
`--enable-loadable-sqlite-extensions`, such as pyenv's default, cannot). PostgreSQL: pgvector is not
used yet (Debian bookworm's archive has no `postgresql-15-pgvector`; services/store/README.md). Where
there is no extension the store ranks with exact cosine in Python over the stored vectors: at a
session's few thousand records that is milliseconds.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, text

from shared.logs import get_logger

SQLITE_VEC = "sqlite-vec"
PYTHON = "python"
log = get_logger(component="database")


def load_sqlite_vec(dbapi_connection: Any) -> bool:
    """Load sqlite-vec into a new SQLite connection; False when this Python or platform cannot."""
    if not hasattr(dbapi_connection, "enable_load_extension"):
        return False
    try:
        import sqlite_vec

        dbapi_connection.enable_load_extension(True)
        try:
            sqlite_vec.load(dbapi_connection)
        finally:
            dbapi_connection.enable_load_extension(False)
    except Exception:  # no wheel for this platform, a refused load: the Python fallback serves
        return False
    return True


def vector_method(engine: Engine) -> str:
    """How this database ranks vectors: "sqlite-vec" when the extension answers, else "python"."""
    if engine.dialect.name != "sqlite":
        # pgvector's distance needs a `vector` column and the extension; the portable blob column is
        # ranked in Python (see docs: services/store/README.md "Memory vectors").
        return PYTHON
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT vec_version()"))
    except Exception:
        return PYTHON
    return SQLITE_VEC


def log_vector_method(engine: Engine) -> str:
    method = vector_method(engine)
    why = {SQLITE_VEC: "the sqlite-vec extension ranks vectors in SQLite",
           PYTHON: "no vector extension loaded: exact cosine in Python over the stored vectors"}[method]
    log.info("database.vector_search", method=method, backend=engine.dialect.name, why=why)
    return method

"""Alembic environment: the store passes its own connection (see services/store/database.py).

Run by hand with `alembic -c` pointing here is not needed: the service migrates itself
at start. For new revisions: `alembic revision -m "..."` with script_location set to this
folder, then write the upgrade by hand (keep models.py in step; a test compares them).
"""

from __future__ import annotations

from alembic import context

from services.store.models import Base

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations through services.store.database.migrate(engine)")

context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    # SQLite alters tables by copying them; batch mode does that for us.
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()

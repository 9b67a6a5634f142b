"""Every turn's detached job runs: at most one *running* job per runtime (was: one queued or running).

Revision ID: 0004_detached_jobs_per_turn
Revises: 0003_setup_runtimes
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_detached_jobs_per_turn"
down_revision = "0003_setup_runtimes"
branch_labels = None
depends_on = None

RUNNING = "status = 'running'"
ACTIVE = "status IN ('queued', 'running')"


def upgrade() -> None:
    op.drop_index("uq_detached_jobs_active", table_name="detached_jobs")
    op.create_index("uq_detached_jobs_running", "detached_jobs", ["session_id", "plugin_id", "runtime_id"], unique=True,
                    sqlite_where=sa.text(RUNNING), postgresql_where=sa.text(RUNNING))


def downgrade() -> None:
    # Older queued jobs of a runtime become superseded so the stricter index fits again.
    op.execute(
        "UPDATE detached_jobs SET status = 'superseded' WHERE status = 'queued' AND EXISTS ("
        "SELECT 1 FROM detached_jobs AS newer WHERE newer.session_id = detached_jobs.session_id "
        "AND newer.plugin_id = detached_jobs.plugin_id AND newer.runtime_id = detached_jobs.runtime_id "
        "AND newer.status IN ('queued', 'running') AND newer.enqueued_at > detached_jobs.enqueued_at)"
    )
    op.drop_index("uq_detached_jobs_running", table_name="detached_jobs")
    op.create_index("uq_detached_jobs_active", "detached_jobs", ["session_id", "plugin_id", "runtime_id"], unique=True,
                    sqlite_where=sa.text(ACTIVE), postgresql_where=sa.text(ACTIVE))

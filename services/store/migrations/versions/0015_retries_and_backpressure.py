"""Retries: a failed turn may be retryable; a detached job queued again waits out its backoff; a
session's active detached jobs are counted when a turn starts.

Revision ID: 0015_retries_and_backpressure
Revises: 0014_sessions_by_owner
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015_retries_and_backpressure"
down_revision = "0014_sessions_by_owner"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("turns") as batch:
        batch.add_column(sa.Column("retryable", sa.Boolean(), nullable=False, server_default=sa.false()))
    with op.batch_alter_table("detached_jobs") as batch:
        batch.add_column(sa.Column("not_before", sa.DateTime(timezone=True), nullable=True))
    op.create_index("ix_detached_jobs_session_status", "detached_jobs", ["session_id", "status"])


def downgrade() -> None:
    op.drop_index("ix_detached_jobs_session_status", table_name="detached_jobs")
    with op.batch_alter_table("detached_jobs") as batch:
        batch.drop_column("not_before")
    with op.batch_alter_table("turns") as batch:
        batch.drop_column("retryable")

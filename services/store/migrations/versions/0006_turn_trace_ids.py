"""Turns name their OpenTelemetry trace, and a background turn the turn that queued its job.

Revision ID: 0006_turn_trace_ids
Revises: 0005_turn_signals
Create Date: 2026-12-16
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_turn_trace_ids"
down_revision = "0005_turn_signals"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("turns") as turns:
        turns.add_column(sa.Column("trace_id", sa.String(32), nullable=False, server_default=""))
        turns.add_column(sa.Column("source_turn_id", sa.String(36), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("turns") as turns:
        turns.drop_column("source_turn_id")
        turns.drop_column("trace_id")

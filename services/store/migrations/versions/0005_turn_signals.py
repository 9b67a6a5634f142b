"""Signals (cancel, interject) to a session's running turn, taken by whichever replica holds its lease.

Revision ID: 0005_turn_signals
Revises: 0004_detached_jobs_per_turn
Create Date: 2026-12-09
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0005_turn_signals"
down_revision = "0004_detached_jobs_per_turn"
branch_labels = None
depends_on = None

ID = sa.String(36)
Json = sa.JSON().with_variant(JSONB(), "postgresql")
Time = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "turn_signals",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("session_id", ID, sa.ForeignKey("sessions.id", ondelete="CASCADE"), nullable=False),
        sa.Column("turn_id", ID, nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("payload", Json, nullable=False),
        sa.Column("created_at", Time, nullable=False),
        sa.Column("taken_at", Time, nullable=True),
    )
    op.create_index("ix_turn_signals_session_turn", "turn_signals", ["session_id", "turn_id"])


def downgrade() -> None:
    op.drop_table("turn_signals")

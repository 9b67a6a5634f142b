"""Dimension settlement receipts: a turn's dimension maintainer that did not settle keeps one open.

Revision ID: 0011_dimension_settlements
Revises: 0010_lorebook
Create Date: 2026-12-11
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0011_dimension_settlements"
down_revision = "0010_lorebook"
branch_labels = None
depends_on = None

ID = sa.String(36)
Json = sa.JSON().with_variant(JSONB(), "postgresql")
Time = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "dimension_settlements",
        sa.Column("session_id", ID, sa.ForeignKey("sessions.id", ondelete="CASCADE"), nullable=False, primary_key=True),
        sa.Column("source_turn_id", ID, primary_key=True),
        sa.Column("runtime_id", sa.String(200), primary_key=True),
        sa.Column("source_logical_turn", sa.BigInteger(), nullable=False),
        sa.Column("plugin_id", sa.String(200), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("input", Json, nullable=False),
        sa.Column("resolved_turn_id", ID, nullable=True),
        sa.Column("created_at", Time, nullable=False),
        sa.Column("updated_at", Time, nullable=False),
    )
    op.create_index("ix_dimension_settlements_session_status", "dimension_settlements", ["session_id", "status"])


def downgrade() -> None:
    op.drop_table("dimension_settlements")

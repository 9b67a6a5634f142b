"""Interactions: what runtimes ask the player (a form, choice or confirmation), open until a turn answers.

Revision ID: 0012_interactions
Revises: 0011_dimension_settlements
Create Date: 2026-12-18
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0012_interactions"
down_revision = "0011_dimension_settlements"
branch_labels = None
depends_on = None

ID = sa.String(36)
Json = sa.JSON().with_variant(JSONB(), "postgresql")
Time = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "interactions",
        sa.Column("session_id", ID, sa.ForeignKey("sessions.id", ondelete="CASCADE"), nullable=False, primary_key=True),
        sa.Column("interaction_id", sa.String(200), primary_key=True),
        sa.Column("turn_id", ID, nullable=False),
        sa.Column("turn_seq", sa.BigInteger(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("plugin_id", sa.String(200), nullable=False),
        sa.Column("runtime_id", sa.String(200), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("interaction", Json, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("answer", Json, nullable=True),
        sa.Column("answered_turn_id", ID, nullable=True),
        sa.Column("created_at", Time, nullable=False),
        sa.Column("answered_at", Time, nullable=True),
    )
    op.create_index("ix_interactions_session_status", "interactions", ["session_id", "status"])


def downgrade() -> None:
    op.drop_table("interactions")

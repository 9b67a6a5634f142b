"""A session's lorebook: entries owned by the world, a plugin or the player (issue 20).

Revision ID: 0010_lorebook
Revises: 0009_session_seats
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0010_lorebook"
down_revision = "0009_session_seats"
branch_labels = None
depends_on = None

ID = sa.String(36)
Json = sa.JSON().with_variant(JSONB(), "postgresql")
Time = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "lorebook_entries",
        sa.Column("session_id", ID, sa.ForeignKey("sessions.id", ondelete="CASCADE"), nullable=False, primary_key=True),
        sa.Column("owner", sa.String(220), primary_key=True),
        sa.Column("entry_id", sa.String(200), primary_key=True),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("keys", Json, nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("constant", sa.Boolean(), nullable=False),
        sa.Column("disabled", sa.Boolean(), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("turn_id", ID, nullable=True),
        sa.Column("created_at", Time, nullable=False),
        sa.Column("updated_at", Time, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("lorebook_entries")

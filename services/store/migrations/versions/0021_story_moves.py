"""The story's moves: each committed turn's checkpoint, the session's line (head, parents, versions, what is off it),
and the moves done by request id.

Revision ID: 0021_story_moves
Revises: 0020_player_waiting
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0021_story_moves"
down_revision = "0020_player_waiting"
branch_labels = None
depends_on = None


Json = sa.JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("sessions") as table:
        table.add_column(sa.Column("head_turn_id", sa.String(36), nullable=True))
    with op.batch_alter_table("turns") as table:
        table.add_column(sa.Column("parent_turn_id", sa.String(36), nullable=True))
        table.add_column(sa.Column("version_of", sa.String(36), nullable=True))
        table.add_column(sa.Column("off_line", sa.Boolean(), nullable=False, server_default=sa.false()))
    with op.batch_alter_table("messages") as table:
        table.add_column(sa.Column("hidden", sa.Boolean(), nullable=False, server_default=sa.false()))
    op.create_table(
        "turn_checkpoints",
        # A turn's id, or the session's for the state it started with.
        sa.Column("turn_id", sa.String(36), primary_key=True),
        sa.Column("session_id", sa.String(36), sa.ForeignKey("sessions.id", ondelete="CASCADE"), nullable=False),
        sa.Column("state", Json, nullable=False),
    )
    op.create_index("ix_turn_checkpoints_session_id", "turn_checkpoints", ["session_id"])
    op.create_table(
        "story_moves",
        sa.Column("session_id", sa.String(36), sa.ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("request_id", sa.String(128), primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("turn_id", sa.String(36), nullable=False),
        sa.Column("result_session_id", sa.String(36), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("story_moves")
    op.drop_index("ix_turn_checkpoints_session_id", "turn_checkpoints")
    op.drop_table("turn_checkpoints")
    with op.batch_alter_table("messages") as table:
        table.drop_column("hidden")
    with op.batch_alter_table("turns") as table:
        table.drop_column("off_line")
        table.drop_column("version_of")
        table.drop_column("parent_turn_id")
    with op.batch_alter_table("sessions") as table:
        table.drop_column("head_turn_id")

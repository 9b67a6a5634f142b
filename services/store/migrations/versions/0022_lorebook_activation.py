"""A lorebook entry's activation rules, and a session's lorebook settings (issue 42): JSON, unset for entries and
sessions from before (the defaults apply).

Revision ID: 0022_lorebook_activation
Revises: 0021_story_moves
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0022_lorebook_activation"
down_revision = "0021_story_moves"
branch_labels = None
depends_on = None

Json = sa.JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("lorebook_entries") as table:
        table.add_column(sa.Column("activation", Json, nullable=True))
    with op.batch_alter_table("sessions") as table:
        table.add_column(sa.Column("lorebook_settings", Json, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("sessions") as table:
        table.drop_column("lorebook_settings")
    with op.batch_alter_table("lorebook_entries") as table:
        table.drop_column("activation")

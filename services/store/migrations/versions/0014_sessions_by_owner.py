"""ListSessions pages one owner's sessions by their last activity.

Revision ID: 0014_sessions_by_owner
Revises: 0013_player_messages
Create Date: 2026-12-05
"""

from __future__ import annotations

from alembic import op

revision = "0014_sessions_by_owner"
down_revision = "0013_player_messages"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_sessions_owner_updated_at", "sessions", ["owner", "updated_at"])


def downgrade() -> None:
    op.drop_index("ix_sessions_owner_updated_at", table_name="sessions")

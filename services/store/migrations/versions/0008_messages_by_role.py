"""An index of the conversation log by role (issue 19): a turn reads its history window from the
latest summary and its Nth-last player message without scanning the session's whole log.

Revision ID: 0008_messages_by_role
Revises: 0007_session_owner
Create Date: 2026-12-04
"""

from __future__ import annotations

from alembic import op

revision = "0008_messages_by_role"
down_revision = "0007_session_owner"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_messages_session_role_seq", "messages", ["session_id", "role", "seq"])


def downgrade() -> None:
    op.drop_index("ix_messages_session_role_seq", table_name="messages")

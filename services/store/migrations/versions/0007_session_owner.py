"""Sessions name the principal that created them (issue 18: a session belongs to its creator).

Revision ID: 0007_session_owner
Revises: 0006_turn_trace_ids
Create Date: 2026-12-20
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_session_owner"
down_revision = "0006_turn_trace_ids"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Older sessions get "": no principal owns them, so only operators reach them.
    with op.batch_alter_table("sessions") as sessions:
        sessions.add_column(sa.Column("owner", sa.String(200), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("sessions") as sessions:
        sessions.drop_column("owner")

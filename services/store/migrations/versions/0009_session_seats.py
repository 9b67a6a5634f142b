"""Sessions have seats: who plays, in which role, as which character (issue 20).

Revision ID: 0009_session_seats
Revises: 0008_messages_by_role
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0009_session_seats"
down_revision = "0008_messages_by_role"
branch_labels = None
depends_on = None

Json = sa.JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    # Older sessions get no seats: their actions take the seat "main" with no character, as before.
    with op.batch_alter_table("sessions") as sessions:
        sessions.add_column(sa.Column("seats", Json, nullable=False, server_default=sa.text("'[]'")))


def downgrade() -> None:
    with op.batch_alter_table("sessions") as sessions:
        sessions.drop_column("seats")

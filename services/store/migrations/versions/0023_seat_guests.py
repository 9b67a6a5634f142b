"""A session lists its seats' guests (players who joined a seat with a grant), for GetSession(or_guest) in one query.

Revision ID: 0023_seat_guests
Revises: 0022_lorebook_activation
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023_seat_guests"
down_revision = "0022_lorebook_activation"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("sessions") as table:
        table.add_column(sa.Column("seat_guests", sa.Text(), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("sessions") as table:
        table.drop_column("seat_guests")

"""A session marks that a player's turn waits for its lease, so its queued detached work waits behind that turn.

Revision ID: 0020_player_waiting
Revises: 0019_lease_origin
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020_player_waiting"
down_revision = "0019_lease_origin"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("sessions") as table:
        table.add_column(sa.Column("player_waiting_until", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("sessions") as table:
        table.drop_column("player_waiting_until")

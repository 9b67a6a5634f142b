"""A turn lease records why its turn runs (its origin), so an interjection reaches a player's turn only.

Revision ID: 0019_lease_origin
Revises: 0018_memory_vectors
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019_lease_origin"
down_revision = "0018_memory_vectors"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("turn_leases") as table:
        table.add_column(sa.Column("origin", sa.String(32), nullable=False, server_default="player"))


def downgrade() -> None:
    with op.batch_alter_table("turn_leases") as table:
        table.drop_column("origin")

"""Sessions keep each setup runtime's progress (setup_runtimes).

Revision ID: 0003_setup_runtimes
Revises: 0002_world_exports_jobs
Create Date: 2025-01-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0003_setup_runtimes"
down_revision = "0002_world_exports_jobs"
branch_labels = None
depends_on = None

Json = sa.JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(sa.Column("setup_runtimes", Json, nullable=False, server_default=sa.text("'{}'")))


def downgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("setup_runtimes")

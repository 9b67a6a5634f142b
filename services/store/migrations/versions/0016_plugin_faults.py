"""Sessions keep the fault breaker's state (plugin_faults), shared by every hooks replica.

Revision ID: 0016_plugin_faults
Revises: 0015_retries_and_backpressure
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0016_plugin_faults"
down_revision = "0015_retries_and_backpressure"
branch_labels = None
depends_on = None

Json = sa.JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(sa.Column("plugin_faults", Json, nullable=False, server_default=sa.text("'{}'")))


def downgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("plugin_faults")

"""memory-search's vector index: one embedding per searchable record and embedding model.

Revision ID: 0018_memory_vectors
Revises: 0017_hook_state
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018_memory_vectors"
down_revision = "0017_hook_state"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "memory_vectors",
        sa.Column("session_id", sa.String(36), sa.ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("model", sa.String(200), primary_key=True),
        sa.Column("source", sa.String(500), primary_key=True),
        sa.Column("key", sa.String(500), primary_key=True),
        sa.Column("content_hash", sa.String(128), nullable=False),
        sa.Column("dimensions", sa.Integer(), nullable=False),
        sa.Column("vector", sa.LargeBinary(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("memory_vectors")

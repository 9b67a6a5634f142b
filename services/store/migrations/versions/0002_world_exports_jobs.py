"""World model (character schema, characters, dimensions), exports, emitted events, turn traces, detached jobs.

Revision ID: 0002_world_exports_jobs
Revises: 0001_initial
Create Date: 2025-01-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0002_world_exports_jobs"
down_revision = "0001_initial"
branch_labels = None
depends_on = None

ID = sa.String(36)
Json = sa.JSON().with_variant(JSONB(), "postgresql")
Time = sa.DateTime(timezone=True)
ACTIVE = "status IN ('queued', 'running')"


def _session_fk() -> sa.Column:
    return sa.Column("session_id", ID, sa.ForeignKey("sessions.id", ondelete="CASCADE"), nullable=False, primary_key=True)


# Long by nature: one table definition after another, in the order they depend on each other;
# a released migration is never edited, so it is not split.
def upgrade() -> None:
    op.create_table(
        "character_schemas",
        _session_fk(),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("types", Json, nullable=False),
        sa.Column("attributes", Json, nullable=False),
        sa.Column("plugin_id", sa.String(200), nullable=False),
        sa.Column("turn_id", ID, nullable=True),
        sa.Column("updated_at", Time, nullable=False),
    )
    op.create_table(
        "characters",
        _session_fk(),
        sa.Column("character_id", sa.String(200), primary_key=True),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("data", Json, nullable=False),
        sa.Column("plugin_id", sa.String(200), nullable=False),
        sa.Column("turn_id", ID, nullable=True),
        sa.Column("created_at", Time, nullable=False),
        sa.Column("updated_at", Time, nullable=False),
    )
    op.create_table(
        "dimensions",
        _session_fk(),
        sa.Column("dimension_id", sa.String(200), primary_key=True),
        sa.Column("owner_plugin_id", sa.String(200), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("schema", Json, nullable=False),
        sa.Column("value", Json, nullable=True),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("turn_id", ID, nullable=True),
        sa.Column("updated_at", Time, nullable=False),
    )
    op.create_table(
        "exports",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("session_id", ID, sa.ForeignKey("sessions.id", ondelete="CASCADE"), nullable=False),
        sa.Column("plugin_id", sa.String(200), nullable=False),
        sa.Column("record_as", sa.String(200), nullable=False),
        sa.Column("runtime_id", sa.String(200), nullable=False),
        sa.Column("value", Json, nullable=True),
        sa.Column("turn_id", ID, nullable=False),
        sa.Column("logical_turn", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", Time, nullable=False),
        sa.UniqueConstraint("session_id", "plugin_id", "record_as", name="uq_exports_record"),
    )
    op.create_table(
        "turn_events",
        sa.Column("id", ID, primary_key=True),
        sa.Column("session_id", ID, sa.ForeignKey("sessions.id", ondelete="CASCADE"), nullable=False),
        sa.Column("turn_id", ID, sa.ForeignKey("turns.id", ondelete="CASCADE"), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("plugin_id", sa.String(200), nullable=False),
        sa.Column("runtime_id", sa.String(200), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("payload", Json, nullable=True),
        sa.Column("created_at", Time, nullable=False),
        sa.UniqueConstraint("turn_id", "seq", name="uq_turn_events_turn_seq"),
    )
    op.create_index("ix_turn_events_session_id", "turn_events", ["session_id"])
    op.create_table(
        "turn_traces",
        sa.Column("turn_id", ID, sa.ForeignKey("turns.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("session_id", ID, sa.ForeignKey("sessions.id", ondelete="CASCADE"), nullable=False),
        sa.Column("entries", Json, nullable=False),
        sa.Column("discarded_units", Json, nullable=False),
    )
    op.create_index("ix_turn_traces_session_id", "turn_traces", ["session_id"])
    op.create_table(
        "detached_jobs",
        sa.Column("id", ID, primary_key=True),
        sa.Column("session_id", ID, sa.ForeignKey("sessions.id", ondelete="CASCADE"), nullable=False),
        sa.Column("turn_id", ID, nullable=False),
        sa.Column("plugin_id", sa.String(200), nullable=False),
        sa.Column("runtime_id", sa.String(200), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("input", Json, nullable=True),
        sa.Column("settle", sa.Boolean(), nullable=False),
        sa.Column("max_queue_ms", sa.BigInteger(), nullable=False),
        sa.Column("max_execution_ms", sa.BigInteger(), nullable=False),
        sa.Column("enqueued_at", Time, nullable=False),
        sa.Column("lease_id", ID, nullable=True),
        sa.Column("holder", sa.String(200), nullable=False),
        sa.Column("claimed_at", Time, nullable=True),
        sa.Column("lease_deadline", Time, nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("result", Json, nullable=True),
        sa.Column("error", sa.Text(), nullable=False),
        sa.Column("finished_at", Time, nullable=True),
    )
    op.create_index(
        "uq_detached_jobs_active",
        "detached_jobs",
        ["session_id", "plugin_id", "runtime_id"],
        unique=True,
        sqlite_where=sa.text(ACTIVE),
        postgresql_where=sa.text(ACTIVE),
    )
    op.create_index("ix_detached_jobs_status_enqueued", "detached_jobs", ["status", "enqueued_at"])


def downgrade() -> None:
    for table in ("detached_jobs", "turn_traces", "turn_events", "exports", "dimensions", "characters", "character_schemas"):
        op.drop_table(table)

"""Initial tables: sessions, turns, messages, turn_leases, plugin_data.

Revision ID: 0001_initial
Revises:
Create Date: 2025-01-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0001_initial"
down_revision = None
branch_labels = None
depends_on = None

ID = sa.String(36)
Json = sa.JSON().with_variant(JSONB(), "postgresql")
Time = sa.DateTime(timezone=True)


# Long by nature: one table definition after another, in the order they depend on each other;
# a released migration is never edited, so it is not split.
def upgrade() -> None:
    op.create_table(
        "sessions",
        sa.Column("id", ID, primary_key=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("phase", sa.String(16), nullable=False),
        sa.Column("locale", sa.String(35), nullable=False),
        sa.Column("world_id", sa.String(200), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("active_plugins", Json, nullable=False),
        sa.Column("requested_plugins", Json, nullable=False),
        sa.Column("excluded_plugins", Json, nullable=False),
        sa.Column("approved_plugins", Json, nullable=False),
        sa.Column("runtime_model_overrides", Json, nullable=False),
        sa.Column("plugin_settings", Json, nullable=False),
        sa.Column("completed_player_turns", sa.BigInteger(), nullable=False),
        sa.Column("last_message_seq", sa.BigInteger(), nullable=False),
        sa.Column("recorded_turns", sa.BigInteger(), nullable=False),
        sa.Column("created_at", Time, nullable=False),
        sa.Column("updated_at", Time, nullable=False),
    )
    op.create_table(
        "turns",
        sa.Column("id", ID, primary_key=True),
        sa.Column("session_id", ID, sa.ForeignKey("sessions.id", ondelete="CASCADE"), nullable=False),
        sa.Column("record_seq", sa.BigInteger(), nullable=False),
        sa.Column("logical_turn", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("idempotency_key", sa.String(128), nullable=True),
        sa.Column("origin", sa.String(32), nullable=False),
        sa.Column("actions", Json, nullable=False),
        sa.Column("player_message", sa.Text(), nullable=False),
        sa.Column("narrative", sa.Text(), nullable=False),
        sa.Column("abort_reason", sa.Text(), nullable=False),
        sa.Column("runtime_results", Json, nullable=False),
        sa.Column("proposal_outcomes", Json, nullable=False),
        sa.Column("hook_trace", Json, nullable=False),
        sa.Column("started_at", Time, nullable=True),
        sa.Column("finished_at", Time, nullable=True),
        sa.Column("recorded_at", Time, nullable=False),
        sa.UniqueConstraint("session_id", "idempotency_key", name="uq_turns_session_idempotency_key"),
        sa.UniqueConstraint("session_id", "record_seq", name="uq_turns_session_record_seq"),
    )
    op.create_table(
        "messages",
        sa.Column("id", ID, primary_key=True),
        sa.Column("session_id", ID, sa.ForeignKey("sessions.id", ondelete="CASCADE"), nullable=False),
        sa.Column("turn_id", ID, sa.ForeignKey("turns.id", ondelete="CASCADE"), nullable=True),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("plugin_id", sa.String(200), nullable=False),
        sa.Column("runtime_id", sa.String(200), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("metadata", Json, nullable=False),
        sa.Column("created_at", Time, nullable=False),
        sa.UniqueConstraint("session_id", "seq", name="uq_messages_session_seq"),
    )
    op.create_index("ix_messages_turn_id", "messages", ["turn_id"])
    op.create_table(
        "turn_leases",
        sa.Column("session_id", ID, sa.ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("lease_id", ID, nullable=False, unique=True),
        sa.Column("turn_id", ID, nullable=False),
        sa.Column("holder", sa.String(200), nullable=False),
        sa.Column("idempotency_key", sa.String(128), nullable=True),
        sa.Column("logical_turn", sa.BigInteger(), nullable=False),
        sa.Column("acquired_at", Time, nullable=False),
        sa.Column("deadline", Time, nullable=False),
    )
    op.create_table(
        "plugin_data",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("session_id", ID, sa.ForeignKey("sessions.id", ondelete="CASCADE"), nullable=False),
        sa.Column("plugin_id", sa.String(200), nullable=False),
        sa.Column("namespace", sa.String(200), nullable=False),
        sa.Column("key", sa.String(500), nullable=False),
        sa.Column("value", Json, nullable=True),
        sa.Column("turn_id", ID, nullable=True),
        sa.Column("created_at", Time, nullable=False),
        sa.Column("updated_at", Time, nullable=False),
        sa.UniqueConstraint("session_id", "plugin_id", "namespace", "key", name="uq_plugin_data_entry"),
    )
    op.create_index("ix_plugin_data_session_plugin", "plugin_data", ["session_id", "plugin_id"])


def downgrade() -> None:
    op.drop_table("plugin_data")
    op.drop_table("turn_leases")
    op.drop_index("ix_messages_turn_id", table_name="messages")
    op.drop_table("messages")
    op.drop_table("turns")
    op.drop_table("sessions")

"""Sessions count their player messages (setup answers included): a tool's context.turn_number.

Revision ID: 0013_player_messages
Revises: 0012_interactions
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013_player_messages"
down_revision = "0012_interactions"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(sa.Column("player_messages", sa.BigInteger(), nullable=False, server_default="0"))
    # Sessions from before: counted from their log once.
    op.execute("UPDATE sessions SET player_messages = "
               "(SELECT COUNT(*) FROM messages WHERE messages.session_id = sessions.id AND messages.role = 'player')")


def downgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("player_messages")

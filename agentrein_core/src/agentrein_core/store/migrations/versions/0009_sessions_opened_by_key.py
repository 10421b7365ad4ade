"""Sessions remember the API key that opened them: an agent key acts on its own sessions only

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02 05:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Sessions opened before have no opener: operator keys act on them, no agent key does.
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(sa.Column("opened_by_key", sa.String(40), nullable=True))
    op.create_index(
        "ix_sessions_org_opener_created", "sessions", ["org_id", "opened_by_key", "created_at", "session_id"]
    )


def downgrade() -> None:
    op.drop_index("ix_sessions_org_opener_created", table_name="sessions")
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("opened_by_key")

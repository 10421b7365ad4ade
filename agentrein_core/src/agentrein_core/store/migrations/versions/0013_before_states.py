"""Before-states: objects as the server read them just before a call changed them (the published SDKs'
precapture, through /compat), kept until the call is reported so that its undo can restore them

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02 14:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

ID = sa.String(length=40)


def upgrade() -> None:
    op.create_table(
        "before_states",
        sa.Column("precapture_id", ID, primary_key=True),
        sa.Column("org_id", ID, nullable=False),
        sa.Column("session_id", ID, sa.ForeignKey("sessions.session_id"), nullable=False),
        sa.Column("connector", sa.String(100), nullable=False),
        sa.Column("api_name", sa.String(500), nullable=False),
        sa.Column("state", sa.JSON(), nullable=False),
        sa.Column("captured_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("action_id", ID, sa.ForeignKey("actions.action_id"), nullable=True),
    )
    op.create_index("ix_before_states_action", "before_states", ["action_id"])


def downgrade() -> None:
    op.drop_index("ix_before_states_action", table_name="before_states")
    op.drop_table("before_states")

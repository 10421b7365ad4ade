"""Undos handed to agent processes: an undo the server cannot run itself (an MCP server reached over the
agent's stdio) is offered to the process that holds the client, which takes it under a lease and reports.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02 11:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

ID = sa.String(length=40)


def upgrade() -> None:
    op.create_table(
        "undo_handoffs",
        sa.Column("handoff_id", ID, primary_key=True),
        sa.Column("org_id", ID, nullable=False),
        sa.Column("session_id", ID, sa.ForeignKey("sessions.session_id"), nullable=False),
        sa.Column("rollback_id", ID, sa.ForeignKey("rollbacks.rollback_id"), nullable=False),
        sa.Column("action_id", ID, sa.ForeignKey("actions.action_id"), nullable=False),
        sa.Column("connector", sa.String(100), nullable=False),
        sa.Column("offered_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("claim_by", sa.DateTime(timezone=True), nullable=False),
        sa.Column("lease_id", sa.String(64)),
        sa.Column("leased_until", sa.DateTime(timezone=True)),
        sa.Column("outcome", sa.String(20)),
        sa.Column("error", sa.Text()),
    )
    op.create_index("ux_undo_handoffs_rollback_action", "undo_handoffs", ["rollback_id", "action_id"], unique=True)
    op.create_index("ix_undo_handoffs_session", "undo_handoffs", ["session_id", "outcome"])


def downgrade() -> None:
    op.drop_index("ix_undo_handoffs_session", table_name="undo_handoffs")
    op.drop_index("ux_undo_handoffs_rollback_action", table_name="undo_handoffs")
    op.drop_table("undo_handoffs")

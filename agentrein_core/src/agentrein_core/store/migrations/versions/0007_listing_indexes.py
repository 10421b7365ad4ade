"""Indexes that keep lists as fast on a big database as on a small one: sessions by stored status and by
agent, newest first; whether a session has an action of a status (or undo status), or a pending approval,
read from an index alone (the display-status filter, a rollback's next undo); a session's latest rollback

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01 15:30:00
"""

from __future__ import annotations

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_sessions_org_status_created", "sessions", ["org_id", "status", "created_at", "session_id"])
    op.create_index("ix_sessions_org_agent_created", "sessions", ["org_id", "agent_id", "created_at", "session_id"])
    op.create_index("ix_actions_session_status", "actions", ["session_id", "status", "undo_status"])
    op.create_index("ix_approvals_session_status", "approvals", ["session_id", "status"])
    op.drop_index("ix_approvals_session", table_name="approvals")
    op.create_index("ix_rollbacks_session_created", "rollbacks", ["session_id", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_rollbacks_session_created", table_name="rollbacks")
    op.create_index("ix_approvals_session", "approvals", ["session_id"])
    op.drop_index("ix_approvals_session_status", table_name="approvals")
    op.drop_index("ix_actions_session_status", table_name="actions")
    op.drop_index("ix_sessions_org_agent_created", table_name="sessions")
    op.drop_index("ix_sessions_org_status_created", table_name="sessions")

"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-29 19:06:52.402858
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:

    op.create_table(
        "organisations",
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("plan", sa.String(length=20), nullable=False),
        sa.Column("policy_version", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("org_id"),
        sa.UniqueConstraint("name"),
    )
    op.create_table(
        "policies",
        sa.Column("policy_id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("effect", sa.String(length=20), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("connector", sa.String(length=200), nullable=True),
        sa.Column("api_name", sa.String(length=500), nullable=True),
        sa.Column("agent_id", sa.String(length=200), nullable=True),
        sa.Column("operation_type", sa.String(length=50), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id"],
            ["organisations.org_id"],
        ),
        sa.PrimaryKeyConstraint("policy_id"),
    )
    with op.batch_alter_table("policies", schema=None) as batch_op:
        batch_op.create_index("ux_policies_org_name", ["org_id", "name"], unique=True)

    op.create_table(
        "sessions",
        sa.Column("session_id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("agent_id", sa.String(length=200), nullable=False),
        sa.Column("intent", sa.Text(), nullable=False),
        sa.Column("sandbox", sa.Boolean(), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("last_seq", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_activity_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("completed_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["org_id"],
            ["organisations.org_id"],
        ),
        sa.PrimaryKeyConstraint("session_id"),
    )
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.create_index("ix_sessions_org_created", ["org_id", "created_at", "session_id"], unique=False)
        batch_op.create_index("ix_sessions_status_activity", ["status", "last_activity_at"], unique=False)

    op.create_table(
        "actions",
        sa.Column("action_id", sa.String(length=40), nullable=False),
        sa.Column("session_id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("connector", sa.String(length=100), nullable=False),
        sa.Column("api_name", sa.String(length=500), nullable=False),
        sa.Column("operation_type", sa.String(length=20), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("response", sa.JSON(), nullable=True),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("undo", sa.JSON(), nullable=True),
        sa.Column("undo_status", sa.String(length=20), nullable=False),
        sa.Column("idempotency_key", sa.String(length=100), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("policy_name", sa.String(length=200), nullable=True),
        sa.Column("review_after", sa.Boolean(), nullable=False),
        sa.Column("undo_requested", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.session_id"],
        ),
        sa.PrimaryKeyConstraint("action_id"),
    )
    with op.batch_alter_table("actions", schema=None) as batch_op:
        batch_op.create_index("ux_actions_session_seq", ["session_id", "seq"], unique=True)

    op.create_table(
        "rollbacks",
        sa.Column("rollback_id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("session_id", sa.String(length=40), nullable=False),
        sa.Column("whole_session", sa.Boolean(), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("trigger", sa.String(length=200), nullable=False),
        sa.Column("requested_by", sa.String(length=200), nullable=False),
        sa.Column("lease_token", sa.String(length=64), nullable=True),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.session_id"],
        ),
        sa.PrimaryKeyConstraint("rollback_id"),
    )
    with op.batch_alter_table("rollbacks", schema=None) as batch_op:
        batch_op.create_index("ix_rollbacks_status", ["status", "lease_until"], unique=False)
        batch_op.create_index(
            "ux_rollbacks_one_active_per_session",
            ["session_id"],
            unique=True,
            sqlite_where=sa.text("status IN ('RUNNING', 'WAITING_APPROVAL')"),
            postgresql_where=sa.text("status IN ('RUNNING', 'WAITING_APPROVAL')"),
        )

    op.create_table(
        "approvals",
        sa.Column("approval_id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("session_id", sa.String(length=40), nullable=False),
        sa.Column("action_id", sa.String(length=40), nullable=False),
        sa.Column("purpose", sa.String(length=20), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("requested_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("timeout_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("resolved_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("resolved_by", sa.String(length=200), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("rollback_id", sa.String(length=40), nullable=True),
        sa.ForeignKeyConstraint(
            ["action_id"],
            ["actions.action_id"],
        ),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.session_id"],
        ),
        sa.PrimaryKeyConstraint("approval_id"),
    )
    with op.batch_alter_table("approvals", schema=None) as batch_op:
        batch_op.create_index("ix_approvals_org_status", ["org_id", "status", "requested_at"], unique=False)
        batch_op.create_index("ix_approvals_session", ["session_id"], unique=False)
        batch_op.create_index("ix_approvals_action", ["action_id"], unique=False)
        batch_op.create_index("ix_approvals_status_timeout", ["status", "timeout_at"], unique=False)


def downgrade() -> None:

    with op.batch_alter_table("approvals", schema=None) as batch_op:
        batch_op.drop_index("ix_approvals_status_timeout")
        batch_op.drop_index("ix_approvals_session")
        batch_op.drop_index("ix_approvals_action")
        batch_op.drop_index("ix_approvals_org_status")

    op.drop_table("approvals")
    with op.batch_alter_table("rollbacks", schema=None) as batch_op:
        batch_op.drop_index(
            "ux_rollbacks_one_active_per_session",
            sqlite_where=sa.text("status IN ('RUNNING', 'WAITING_APPROVAL')"),
            postgresql_where=sa.text("status IN ('RUNNING', 'WAITING_APPROVAL')"),
        )
        batch_op.drop_index("ix_rollbacks_status")

    op.drop_table("rollbacks")
    with op.batch_alter_table("actions", schema=None) as batch_op:
        batch_op.drop_index("ux_actions_session_seq")

    op.drop_table("actions")
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.drop_index("ix_sessions_status_activity")
        batch_op.drop_index("ix_sessions_org_created")

    op.drop_table("sessions")
    with op.batch_alter_table("policies", schema=None) as batch_op:
        batch_op.drop_index("ux_policies_org_name")

    op.drop_table("policies")
    op.drop_table("organisations")

"""Dashboard users: email, argon2 password hash, role; an index for the reviewer's queue

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29 23:50:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "users",
        sa.Column("user_id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("email", sa.String(length=254), nullable=False),
        sa.Column("role", sa.String(length=20), nullable=False),
        sa.Column("password_hash", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("sign_in_epoch", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["org_id"], ["organisations.org_id"]),
        sa.PrimaryKeyConstraint("user_id"),
        sa.UniqueConstraint("email"),
    )
    # The reviewer's queue reads the latest decisions of an organisation.
    op.create_index("ix_approvals_org_resolved", "approvals", ["org_id", "resolved_at"])


def downgrade() -> None:
    op.drop_index("ix_approvals_org_resolved", table_name="approvals")
    op.drop_table("users")

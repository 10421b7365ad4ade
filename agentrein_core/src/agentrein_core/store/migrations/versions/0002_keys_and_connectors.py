"""API keys, per-organisation connector configurations, rollback approval timeouts, one record per call key

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29 21:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("rollbacks") as batch:
        batch.add_column(sa.Column("approval_timeout_ms", sa.BigInteger(), nullable=True))
    op.create_index("ux_actions_session_key", "actions", ["session_id", "idempotency_key"], unique=True)
    op.create_table(
        "api_keys",
        sa.Column("key_id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("role", sa.String(length=20), nullable=False),
        sa.Column("key_hash", sa.String(length=64), nullable=False),
        sa.Column("prefix", sa.String(length=20), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["org_id"], ["organisations.org_id"]),
        sa.PrimaryKeyConstraint("key_id"),
        sa.UniqueConstraint("key_hash"),
    )
    op.create_table(
        "connector_configs",
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("connector", sa.String(length=100), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("credentials", sa.Text(), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["org_id"], ["organisations.org_id"]),
        sa.PrimaryKeyConstraint("org_id", "connector"),
    )


def downgrade() -> None:
    op.drop_table("connector_configs")
    op.drop_table("api_keys")
    op.drop_index("ux_actions_session_key", table_name="actions")
    with op.batch_alter_table("rollbacks") as batch:
        batch.drop_column("approval_timeout_ms")

"""Policies that hold a matching call before it runs, with their own approval timeout

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01 12:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("policies") as batch:
        batch.add_column(sa.Column("before_execution", sa.Boolean(), nullable=False, server_default=sa.false()))
        batch.add_column(sa.Column("approval_timeout_ms", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("policies") as batch:
        batch.drop_column("approval_timeout_ms")
        batch.drop_column("before_execution")

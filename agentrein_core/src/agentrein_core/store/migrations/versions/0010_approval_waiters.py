"""Approvals remember until when the agent was last known to wait for them (its long-poll): the dashboard says
whether an agent still waits for a before-execution request, on every replica.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02 05:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("approvals") as batch:
        batch.add_column(sa.Column("waited_until", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("approvals") as batch:
        batch.drop_column("waited_until")

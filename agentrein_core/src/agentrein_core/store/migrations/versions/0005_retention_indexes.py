"""Indexes that keep retention's pruning cheap: settled deliveries and answered checks by age, deliveries
by event

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 10:30:00
"""

from __future__ import annotations

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_verifications_checked", "verifications", ["checked_at"])
    op.create_index("ix_deliveries_event", "deliveries", ["event_id"])
    op.create_index("ix_deliveries_settled", "deliveries", ["status", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_deliveries_settled", table_name="deliveries")
    op.drop_index("ix_deliveries_event", table_name="deliveries")
    op.drop_index("ix_verifications_checked", table_name="verifications")

"""Before-states by age, for retention's pruning, and by organisation

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-02 17:30:00
"""

from __future__ import annotations

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_before_states_captured", "before_states", ["captured_at"])
    op.create_index("ix_before_states_org", "before_states", ["org_id", "captured_at"])


def downgrade() -> None:
    op.drop_index("ix_before_states_org", table_name="before_states")
    op.drop_index("ix_before_states_captured", table_name="before_states")

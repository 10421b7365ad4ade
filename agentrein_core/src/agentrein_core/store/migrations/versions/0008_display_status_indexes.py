"""Indexes of the few actions that make a session show ROLLING_BACK (an undo under way) or ROLLBACK_FAILED (a
failed undo): the display-status filter tests thousands of sessions for them, each probe now of a small index.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01 23:45:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

UNDO_UNDER_WAY = sa.text("undo_status IN ('AWAITING_APPROVAL', 'IN_PROGRESS')")
UNDO_FAILED = sa.text("status = 'ROLLBACK_FAILED'")


def upgrade() -> None:
    for name, where in (("ix_actions_undo_under_way", UNDO_UNDER_WAY), ("ix_actions_undo_failed", UNDO_FAILED)):
        op.create_index(name, "actions", ["session_id"], sqlite_where=where, postgresql_where=where)


def downgrade() -> None:
    op.drop_index("ix_actions_undo_failed", table_name="actions")
    op.drop_index("ix_actions_undo_under_way", table_name="actions")

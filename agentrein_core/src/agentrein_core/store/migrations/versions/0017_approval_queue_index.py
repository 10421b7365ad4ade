"""An index a reviewer's queue is read from in order: pending approvals of an organisation by purpose (those
someone waits for first), least time left first (``Approvals.queue``). Before, the queue sorted every pending
approval of the organisation on each read. On SQLite whose planner has statistics for the approvals already
(``PRAGMA optimize`` gathered them), they are gathered again with the new index in them: an index without
statistics beside indexes with some looks the most selective, and was chosen where it sorts.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-04 04:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_approvals_org_queue", "approvals", ["org_id", "status", "purpose", "timeout_at", "approval_id"])
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        known = bind.execute(sa.text("SELECT count(*) FROM sqlite_stat1 WHERE tbl = 'approvals'")).scalar_one()
        if known:
            op.execute("ANALYZE approvals")


def downgrade() -> None:
    op.drop_index("ix_approvals_org_queue", table_name="approvals")

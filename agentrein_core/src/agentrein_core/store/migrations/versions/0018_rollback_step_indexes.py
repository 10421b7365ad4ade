"""The two reads of every rollback step that grew with the rollback, read from an index of their own.

The index of a session's actions by status and undo status ends with their seq: a rollback finds the head of its
chain (``Actions.next_to_undo``) as the highest seq of each undoable pair of statuses, a probe each. Before, it
read down the seq index past every action undone so far, so each step of a long rollback was slower than the last
(a rollback of 1,000 actions read half a million rows). On SQLite whose planner has statistics for the actions
(``PRAGMA optimize`` gathered them), they are gathered again for the rebuilt index.

The handoffs of an action to the agent's process are found by the action (``Rollbacks.handoffs_of``), not among
all of its session's: in a rollback whose undos all run in the agent's process, there is one more each step.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-04 10:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_index("ix_actions_session_status", table_name="actions")
    op.create_index("ix_actions_session_status", "actions", ["session_id", "status", "undo_status", "seq"])
    op.create_index("ix_undo_handoffs_action", "undo_handoffs", ["action_id"])
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        known = bind.execute(sa.text("SELECT count(*) FROM sqlite_stat1 WHERE tbl = 'actions'")).scalar_one()
        if known:
            op.execute("ANALYZE actions")


def downgrade() -> None:
    op.drop_index("ix_undo_handoffs_action", table_name="undo_handoffs")
    op.drop_index("ix_actions_session_status", table_name="actions")
    op.create_index("ix_actions_session_status", "actions", ["session_id", "status", "undo_status"])

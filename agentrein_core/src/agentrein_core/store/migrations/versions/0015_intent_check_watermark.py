"""Intent checks found from a watermark per session, not queued by each recorded call: a session's
``checked_seq`` and ``check_due`` (with the index the supervisor reads them by), an action's ``check_wanted``

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-02 18:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Every check was queued by its call until now: nothing waits behind the watermark.
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(sa.Column("checked_seq", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("check_due", sa.Boolean(), nullable=False, server_default=sa.false()))
    with op.batch_alter_table("actions") as batch:
        batch.add_column(sa.Column("check_wanted", sa.Boolean(), nullable=False, server_default=sa.false()))
    op.create_index(
        "ix_sessions_check_due",
        "sessions",
        ["org_id"],
        sqlite_where=sa.text("check_due"),
        postgresql_where=sa.text("check_due"),
    )


def downgrade() -> None:
    # A check that a call wants and no round has queued yet is queued as 0014 did, by its call: a row per action,
    # due at once, named after its action (a call wants one check at most).
    op.execute(
        "INSERT INTO verifications"
        " (verification_id, org_id, session_id, action_id, rationale, verifier, attempts, due_at, created_at)"
        " SELECT 'ver_' || substr(action_id, 5), org_id, session_id, action_id, '', '', 0, updated_at, updated_at"
        " FROM actions WHERE check_wanted"
    )
    op.drop_index("ix_sessions_check_due", table_name="sessions")
    with op.batch_alter_table("actions") as batch:
        batch.drop_column("check_wanted")
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("check_due")
        batch.drop_column("checked_seq")

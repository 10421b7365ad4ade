"""SQLite: the table of the query planner's statistics (``sqlite_stat1``) exists from the start, empty, so that
``PRAGMA optimize`` as a connection closes (``database._sqlite_on_close``) never creates it. Creating it changes
the schema, which makes every other open connection reload it and forget which tables its queries wanted
statistics for: their ``PRAGMA optimize`` would then analyse nothing. PostgreSQL keeps its own statistics.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-03 08:20:00
"""

from __future__ import annotations

from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute("ANALYZE sqlite_schema")  # analyses nothing (no index), creates sqlite_stat1


def downgrade() -> None:
    pass  # the statistics stay: SQLite's own table, which an older AgentRein ignores as well

"""Sessions say which client recorded them when it is not one of AgentRein's own: the published SDKs of the
hosted product, through the compatible API (``/compat``)

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02 13:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(sa.Column("recorded_with", sa.String(100), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("recorded_with")

"""Intent verifications, organisation settings, events, webhooks and their deliveries

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30 00:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

ID = sa.String(length=40)
WHEN = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "verifications",
        sa.Column("verification_id", ID, nullable=False),
        sa.Column("org_id", ID, nullable=False),
        sa.Column("session_id", ID, nullable=False),
        sa.Column("action_id", ID, nullable=True),
        sa.Column("outcome", sa.String(length=20), nullable=True),
        sa.Column("rationale", sa.Text(), nullable=False),
        sa.Column("verifier", sa.String(length=200), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("due_at", WHEN, nullable=True),
        sa.Column("checked_at", WHEN, nullable=True),
        sa.Column("created_at", WHEN, nullable=False),
        sa.ForeignKeyConstraint(["org_id"], ["organisations.org_id"]),
        sa.ForeignKeyConstraint(["session_id"], ["sessions.session_id"]),
        sa.ForeignKeyConstraint(["action_id"], ["actions.action_id"]),
        sa.PrimaryKeyConstraint("verification_id"),
    )
    op.create_index("ix_verifications_session", "verifications", ["session_id"])
    op.create_index("ix_verifications_due", "verifications", ["due_at"])
    op.create_table(
        "organisation_settings",
        sa.Column("org_id", ID, nullable=False),
        sa.Column("on_drift", sa.String(length=20), nullable=False),
        sa.Column("verifier_url", sa.String(length=2000), nullable=True),
        sa.Column("verifier_model", sa.String(length=200), nullable=True),
        sa.Column("verifier_api_key", sa.Text(), nullable=True),
        sa.Column("webhook_hosts", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["org_id"], ["organisations.org_id"]),
        sa.PrimaryKeyConstraint("org_id"),
    )
    op.create_table(
        "events",
        sa.Column("event_id", ID, nullable=False),
        sa.Column("org_id", ID, nullable=False),
        sa.Column("type", sa.String(length=40), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.Column("created_at", WHEN, nullable=False),
        sa.Column("dispatched_at", WHEN, nullable=True),
        sa.ForeignKeyConstraint(["org_id"], ["organisations.org_id"]),
        sa.PrimaryKeyConstraint("event_id"),
    )
    op.create_index("ix_events_undispatched", "events", ["dispatched_at", "created_at"])
    op.create_table(
        "webhooks",
        sa.Column("webhook_id", ID, nullable=False),
        sa.Column("org_id", ID, nullable=False),
        sa.Column("url", sa.String(length=2000), nullable=False),
        sa.Column("events", sa.JSON(), nullable=False),
        sa.Column("secret", sa.Text(), nullable=False),
        sa.Column("format", sa.String(length=20), nullable=False),
        sa.Column("created_at", WHEN, nullable=False),
        sa.ForeignKeyConstraint(["org_id"], ["organisations.org_id"]),
        sa.PrimaryKeyConstraint("webhook_id"),
    )
    op.create_index("ix_webhooks_org", "webhooks", ["org_id"])
    op.create_table(
        "deliveries",
        sa.Column("delivery_id", ID, nullable=False),
        sa.Column("org_id", ID, nullable=False),
        sa.Column("webhook_id", ID, nullable=False),
        sa.Column("event_id", ID, nullable=False),
        sa.Column("event_type", sa.String(length=40), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("due_at", WHEN, nullable=True),
        sa.Column("last_status", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", WHEN, nullable=False),
        sa.Column("delivered_at", WHEN, nullable=True),
        sa.ForeignKeyConstraint(["org_id"], ["organisations.org_id"]),
        sa.ForeignKeyConstraint(["webhook_id"], ["webhooks.webhook_id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["event_id"], ["events.event_id"]),
        sa.PrimaryKeyConstraint("delivery_id"),
    )
    op.create_index("ix_deliveries_webhook", "deliveries", ["webhook_id", "created_at"])
    op.create_index("ix_deliveries_due", "deliveries", ["status", "due_at"])


def downgrade() -> None:
    op.drop_table("deliveries")
    op.drop_table("webhooks")
    op.drop_table("events")
    op.drop_table("organisation_settings")
    op.drop_table("verifications")

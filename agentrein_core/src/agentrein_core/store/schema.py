"""The database tables (SQLAlchemy Core). Alembic migrations in ``migrations/`` create and evolve them;
this module is the model the migrations are checked against."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Dialect,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    TypeDecorator,
    false,
    text,
)

from agentrein_core.rules import UNDO_UNDER_WAY
from agentrein_core.statuses import ActionStatus


class UTCDateTime(TypeDecorator[datetime]):
    """An aware UTC datetime on every backend (SQLite hands back naive values otherwise)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("naive datetime given to the store; use agentrein_core.clock.utcnow()")
        return value.astimezone(UTC) if value is not None else None

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        moment: datetime = value
        return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


metadata = MetaData()
ID = String(40)

organisations = Table(
    "organisations",
    metadata,
    Column("org_id", ID, primary_key=True),
    Column("name", String(200), nullable=False, unique=True),
    Column("plan", String(20), nullable=False),
    Column("policy_version", Integer, nullable=False),  # bumped by every policy change: caches key on it
    Column("created_at", UTCDateTime, nullable=False),
)

sessions = Table(
    "sessions",
    metadata,
    Column("session_id", ID, primary_key=True),
    Column("org_id", ID, ForeignKey("organisations.org_id"), nullable=False),
    Column("agent_id", String(200), nullable=False),
    Column("intent", Text, nullable=False),
    Column("sandbox", Boolean, nullable=False),
    Column("status", String(20), nullable=False),
    Column("last_seq", Integer, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("last_activity_at", UTCDateTime, nullable=False),
    Column("completed_at", UTCDateTime),
    # The API key that opened it: an agent key acts on its own sessions only (none: an embedded engine's, or
    # opened before keys were remembered; operators act on those).
    Column("opened_by_key", ID),
    # The client that recorded it when not one of AgentRein's own (a published SDK, through /compat).
    Column("recorded_with", String(100)),
    # The intent checks' watermark (engine/intent_checks.py): every action up to ``checked_seq`` has had its
    # check queued; ``check_due`` says a call confirmed since wants one. Written by the store's own statements
    # only, never with a record (rows.py), so a stale session written back cannot clear them.
    Column("checked_seq", Integer, nullable=False, server_default="0"),
    Column("check_due", Boolean, nullable=False, server_default=false()),
    # The sessions whose checks wait to be queued, read by the supervisor; a call writes it only when it flips.
    Index("ix_sessions_check_due", "org_id", sqlite_where=text("check_due"), postgresql_where=text("check_due")),
    Index("ix_sessions_org_created", "org_id", "created_at", "session_id"),
    Index("ix_sessions_status_activity", "status", "last_activity_at"),
    # A list filtered by stored status or by agent walks its sessions newest first (store/sessions.py).
    Index("ix_sessions_org_status_created", "org_id", "status", "created_at", "session_id"),
    Index("ix_sessions_org_agent_created", "org_id", "agent_id", "created_at", "session_id"),
    # An agent key's list: the sessions it opened, newest first (and the approvals of those).
    Index("ix_sessions_org_opener_created", "org_id", "opened_by_key", "created_at", "session_id"),
)

actions = Table(
    "actions",
    metadata,
    Column("action_id", ID, primary_key=True),
    Column("session_id", ID, ForeignKey("sessions.session_id"), nullable=False),
    Column("org_id", ID, nullable=False),
    Column("seq", Integer, nullable=False),
    Column("connector", String(100), nullable=False),
    Column("api_name", String(500), nullable=False),
    Column("operation_type", String(20), nullable=False),
    Column("payload", JSON, nullable=False),
    Column("response", JSON(none_as_null=True)),
    Column("status", String(20), nullable=False),
    Column("undo", JSON(none_as_null=True)),
    Column("undo_status", String(20), nullable=False),
    Column("idempotency_key", String(100), nullable=False),
    Column("error", Text),
    Column("policy_name", String(200)),
    Column("review_after", Boolean, nullable=False),
    Column("undo_requested", Boolean, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    # Its call ran and wants an intent check, not yet queued (set with its outcome: no write of its own).
    Column("check_wanted", Boolean, nullable=False, server_default=false()),
    Index("ux_actions_session_seq", "session_id", "seq", unique=True),
    # A call is recorded once: a journal replay finds the record its key already made.
    Index("ux_actions_session_key", "session_id", "idempotency_key", unique=True),
    # Whether a session has an action of a status (or undo status) is read from the index alone: the
    # display-status rules a list filters by (store/sessions.py); and the head of a rollback's chain, the
    # highest seq of each status and undo status, a probe each however many actions were undone before it.
    Index("ix_actions_session_status", "session_id", "status", "undo_status", "seq"),
)
# The two rare clues of the display-status rules (rules.DISPLAY_RULES), each an index of the few actions that
# give it (an undo under way, a failed undo): a list filtered by a display status tests thousands of sessions
# for them, and on PostgreSQL a probe of these is several times cheaper than of the index above (SQLite's
# planner may prefer that one, which covers the test too). A recorded call writes neither; a rollback's undo
# steps move actions in and out of the first.
_undo_under_way = actions.c.undo_status.in_(sorted(UNDO_UNDER_WAY))
_undo_failed = actions.c.status == ActionStatus.ROLLBACK_FAILED.value
Index("ix_actions_undo_under_way", actions.c.session_id, sqlite_where=_undo_under_way, postgresql_where=_undo_under_way)
Index("ix_actions_undo_failed", actions.c.session_id, sqlite_where=_undo_failed, postgresql_where=_undo_failed)

approvals = Table(
    "approvals",
    metadata,
    Column("approval_id", ID, primary_key=True),
    Column("org_id", ID, nullable=False),
    Column("session_id", ID, ForeignKey("sessions.session_id"), nullable=False),
    Column("action_id", ID, ForeignKey("actions.action_id"), nullable=False),
    Column("purpose", String(20), nullable=False),
    Column("status", String(20), nullable=False),
    Column("requested_at", UTCDateTime, nullable=False),
    Column("timeout_at", UTCDateTime, nullable=False),
    Column("resolved_at", UTCDateTime),
    Column("resolved_by", String(200)),
    Column("reason", Text),
    Column("rollback_id", ID),
    Column("waited_until", UTCDateTime),
    Index("ix_approvals_org_status", "org_id", "status", "requested_at"),
    Index("ix_approvals_session_status", "session_id", "status"),  # "has a pending approval", from the index
    Index("ix_approvals_action", "action_id"),
    Index("ix_approvals_status_timeout", "status", "timeout_at"),
    Index("ix_approvals_org_resolved", "org_id", "resolved_at"),
    Index("ix_approvals_org_queue", "org_id", "status", "purpose", "timeout_at", "approval_id"),  # a queue, in order
)

policies = Table(
    "policies",
    metadata,
    Column("policy_id", ID, primary_key=True),
    Column("org_id", ID, ForeignKey("organisations.org_id"), nullable=False),
    Column("name", String(200), nullable=False),
    Column("effect", String(20), nullable=False),
    Column("enabled", Boolean, nullable=False),
    Column("connector", String(200)),
    Column("api_name", String(500)),
    Column("agent_id", String(200)),
    Column("operation_type", String(50)),
    Column("created_at", UTCDateTime, nullable=False),
    Column("before_execution", Boolean, nullable=False, server_default=false()),
    Column("approval_timeout_ms", BigInteger),
    Index("ux_policies_org_name", "org_id", "name", unique=True),
)

#: Columns no record holds, written by the store's own statements only: an insert leaves them to their
#: defaults, and a record written back never touches them.
STORE_ONLY = frozenset({"checked_seq", "check_due", "check_wanted"})

_ACTIVE_ROLLBACK = text("status IN ('RUNNING', 'WAITING_APPROVAL')")

rollbacks = Table(
    "rollbacks",
    metadata,
    Column("rollback_id", ID, primary_key=True),
    Column("org_id", ID, nullable=False),
    Column("session_id", ID, ForeignKey("sessions.session_id"), nullable=False),
    Column("whole_session", Boolean, nullable=False),
    Column("approval_timeout_ms", BigInteger),
    Column("status", String(20), nullable=False),
    Column("trigger", String(200), nullable=False),
    Column("requested_by", String(200), nullable=False),
    Column("lease_token", String(64)),
    Column("lease_until", UTCDateTime),
    Column("created_at", UTCDateTime, nullable=False),
    Column("finished_at", UTCDateTime),
    Column("error", Text),
    # At most one unfinished rollback per session: a second request finds the first instead of racing it.
    Index(
        "ux_rollbacks_one_active_per_session",
        "session_id",
        unique=True,
        sqlite_where=_ACTIVE_ROLLBACK,
        postgresql_where=_ACTIVE_ROLLBACK,
    ),
    Index("ix_rollbacks_status", "status", "lease_until"),
    # A session's latest rollback, read with every confirmation (a success confirmed after it ended).
    Index("ix_rollbacks_session_created", "session_id", "created_at"),
)

undo_handoffs = Table(
    "undo_handoffs",
    metadata,
    Column("handoff_id", ID, primary_key=True),
    Column("org_id", ID, nullable=False),
    Column("session_id", ID, ForeignKey("sessions.session_id"), nullable=False),
    Column("rollback_id", ID, ForeignKey("rollbacks.rollback_id"), nullable=False),
    Column("action_id", ID, ForeignKey("actions.action_id"), nullable=False),
    Column("connector", String(100), nullable=False),
    Column("offered_at", UTCDateTime, nullable=False),
    Column("claim_by", UTCDateTime, nullable=False),
    Column("lease_id", String(64)),
    Column("leased_until", UTCDateTime),
    Column("outcome", String(20)),
    Column("error", Text),
    # One handoff of an action per rollback job: the job that offered it finds it again.
    Index("ux_undo_handoffs_rollback_action", "rollback_id", "action_id", unique=True),
    # An agent's claim looks for the open handoffs of its sessions.
    Index("ix_undo_handoffs_session", "session_id", "outcome"),
    # A rollback step reads whether any job ever handed its action's undo over (by the action, not the session's).
    Index("ix_undo_handoffs_action", "action_id"),
)

before_states = Table(
    "before_states",
    metadata,
    Column("precapture_id", ID, primary_key=True),
    Column("org_id", ID, nullable=False),
    Column("session_id", ID, ForeignKey("sessions.session_id"), nullable=False),
    Column("connector", String(100), nullable=False),
    Column("api_name", String(500), nullable=False),
    Column("state", JSON, nullable=False),
    Column("captured_at", UTCDateTime, nullable=False),
    Column("action_id", ID, ForeignKey("actions.action_id")),
    # A held call's confirmation finds the before-state read for it.
    Index("ix_before_states_action", "action_id"),
    # Retention prunes them by age; an organisation's are found without a scan.
    Index("ix_before_states_captured", "captured_at"),
    Index("ix_before_states_org", "org_id", "captured_at"),
)

api_keys = Table(
    "api_keys",
    metadata,
    Column("key_id", ID, primary_key=True),
    Column("org_id", ID, ForeignKey("organisations.org_id"), nullable=False),
    Column("role", String(20), nullable=False),
    Column("key_hash", String(64), nullable=False, unique=True),
    Column("prefix", String(20), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("revoked_at", UTCDateTime),
)

users = Table(
    "users",
    metadata,
    Column("user_id", ID, primary_key=True),
    Column("org_id", ID, ForeignKey("organisations.org_id"), nullable=False),
    Column("email", String(254), nullable=False, unique=True),
    Column("role", String(20), nullable=False),
    Column("password_hash", String(200), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("sign_in_epoch", Integer, nullable=False),
)

connector_configs = Table(
    "connector_configs",
    metadata,
    Column("org_id", ID, ForeignKey("organisations.org_id"), primary_key=True),
    Column("connector", String(100), primary_key=True),
    Column("enabled", Boolean, nullable=False),
    Column("config", JSON, nullable=False),
    Column("credentials", Text),  # a Fernet token, never plaintext
    Column("updated_at", UTCDateTime, nullable=False),
)

verifications = Table(
    "verifications",
    metadata,
    Column("verification_id", ID, primary_key=True),
    Column("org_id", ID, ForeignKey("organisations.org_id"), nullable=False),
    Column("session_id", ID, ForeignKey("sessions.session_id"), nullable=False),
    Column("action_id", ID, ForeignKey("actions.action_id")),  # NULL: the session as a whole
    Column("outcome", String(20)),
    Column("rationale", Text, nullable=False),
    Column("verifier", String(200), nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("due_at", UTCDateTime),
    Column("checked_at", UTCDateTime),
    Column("created_at", UTCDateTime, nullable=False),
    Index("ix_verifications_session", "session_id"),
    Index("ix_verifications_due", "due_at"),
    Index("ix_verifications_checked", "checked_at"),  # retention prunes answered checks by age
)

organisation_settings = Table(
    "organisation_settings",
    metadata,
    Column("org_id", ID, ForeignKey("organisations.org_id"), primary_key=True),
    Column("on_drift", String(20), nullable=False),
    Column("verifier_url", String(2000)),
    Column("verifier_model", String(200)),
    Column("verifier_api_key", Text),
    Column("webhook_hosts", JSON, nullable=False),
)

events = Table(
    "events",
    metadata,
    Column("event_id", ID, primary_key=True),
    Column("org_id", ID, ForeignKey("organisations.org_id"), nullable=False),
    Column("type", String(40), nullable=False),
    Column("data", JSON, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("dispatched_at", UTCDateTime),
    Index("ix_events_undispatched", "dispatched_at", "created_at"),
)

webhooks = Table(
    "webhooks",
    metadata,
    Column("webhook_id", ID, primary_key=True),
    Column("org_id", ID, ForeignKey("organisations.org_id"), nullable=False),
    Column("url", String(2000), nullable=False),
    Column("events", JSON, nullable=False),
    Column("secret", Text, nullable=False),
    Column("format", String(20), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Index("ix_webhooks_org", "org_id"),
)

deliveries = Table(
    "deliveries",
    metadata,
    Column("delivery_id", ID, primary_key=True),
    Column("org_id", ID, ForeignKey("organisations.org_id"), nullable=False),
    Column("webhook_id", ID, ForeignKey("webhooks.webhook_id", ondelete="CASCADE"), nullable=False),
    Column("event_id", ID, ForeignKey("events.event_id"), nullable=False),
    Column("event_type", String(40), nullable=False),
    Column("status", String(20), nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("due_at", UTCDateTime),
    Column("last_status", Integer),
    Column("last_error", Text),
    Column("created_at", UTCDateTime, nullable=False),
    Column("delivered_at", UTCDateTime),
    Index("ix_deliveries_webhook", "webhook_id", "created_at"),
    Index("ix_deliveries_due", "status", "due_at"),
    Index("ix_deliveries_event", "event_id"),  # retention keeps an event some delivery still refers to
    Index("ix_deliveries_settled", "status", "created_at"),  # and prunes settled deliveries by age
)

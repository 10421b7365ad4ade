"""Every status and kind the product stores, spelled exactly as DESIGN.md §4 spells them.

They are ``StrEnum``s so a value compares equal to its stored string (``ActionStatus.SUCCESS == "SUCCESS"``)
and serialises as that string everywhere: database, JSON and logs.
"""

from __future__ import annotations

from enum import StrEnum


class ActionStatus(StrEnum):
    """Where one recorded call stands. ``CLEARED`` is "cleared to run, not yet confirmed"."""

    PENDING_APPROVAL = "PENDING_APPROVAL"
    CLEARED = "CLEARED"
    SUCCESS = "SUCCESS"
    FAILED = "FAILED"
    ROLLED_BACK = "ROLLED_BACK"
    ROLLBACK_FAILED = "ROLLBACK_FAILED"


class UndoStatus(StrEnum):
    """Where the undo of one action stands, kept apart from the action's own status."""

    NONE = "NONE"
    SKIPPED = "SKIPPED"
    IN_PROGRESS = "IN_PROGRESS"
    AWAITING_APPROVAL = "AWAITING_APPROVAL"
    DONE = "DONE"
    FAILED = "FAILED"
    DECLINED = "DECLINED"


class SessionStatus(StrEnum):
    """The stored status of a session; what people see is :class:`DisplayStatus`."""

    ACTIVE = "ACTIVE"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    ROLLED_BACK = "ROLLED_BACK"
    ABANDONED = "ABANDONED"


class DisplayStatus(StrEnum):
    """A session's status as derived on read from its actions and approvals (see ``rules.display_status``)."""

    ROLLING_BACK = "ROLLING_BACK"
    ROLLBACK_FAILED = "ROLLBACK_FAILED"
    AWAITING_APPROVAL = "AWAITING_APPROVAL"
    REVERTED = "REVERTED"
    PARTIALLY_REVERTED = "PARTIALLY_REVERTED"
    ACTIVE = "ACTIVE"
    COMPLETED = "COMPLETED"
    ABANDONED = "ABANDONED"
    FAILED = "FAILED"


class ApprovalStatus(StrEnum):
    PENDING = "PENDING"
    APPROVED = "APPROVED"
    REJECTED = "REJECTED"
    EXPIRED = "EXPIRED"


class ApprovalPurpose(StrEnum):
    """Why a human is asked: before a call runs, after it ran (policy), or before its undo runs."""

    BEFORE_EXECUTION = "BEFORE_EXECUTION"
    AFTER_EXECUTION = "AFTER_EXECUTION"
    ROLLBACK = "ROLLBACK"


class OperationType(StrEnum):
    """What a call does to the service. ``READ`` calls pass through unrecorded."""

    CREATE = "CREATE"
    UPDATE = "UPDATE"
    DELETE = "DELETE"
    OTHER = "OTHER"
    READ = "READ"


class PolicyEffect(StrEnum):
    """What a matching policy does; the strictest enabled match wins (see ``policies.STRICTNESS``)."""

    ALLOW = "ALLOW"
    REQUIRE_APPROVAL = "REQUIRE_APPROVAL"
    BLOCK = "BLOCK"


class RollbackStatus(StrEnum):
    """A rollback job: running (or resumable), paused on a rollback approval, or finished."""

    RUNNING = "RUNNING"
    WAITING_APPROVAL = "WAITING_APPROVAL"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"


class HandoffOutcome(StrEnum):
    """How an undo handed to the agent's process ended: as that process reported it (``DONE``, ``FAILED``), or
    ``EXPIRED`` when the rollback gave up on it first (written before the undo is failed, so that a claim, a
    renewal or a report racing that decision loses it, or wins it)."""

    DONE = "DONE"
    FAILED = "FAILED"
    EXPIRED = "EXPIRED"


class Plan(StrEnum):
    """An organisation's plan. ``free`` has no approval gates."""

    FREE = "free"
    TEAM = "team"


class Role(StrEnum):
    """What an API key may do: an ``agent`` records its own work and rolls back ``ACTIVE`` sessions; an
    ``operator`` also reviews, manages policies, connectors and keys, and rolls back per status reference §3."""

    AGENT = "agent"
    OPERATOR = "operator"


class UserRole(StrEnum):
    """What a dashboard user may do: a ``reviewer`` decides approvals and reads sessions; an ``admin`` also
    rolls sessions back and manages policies, connectors, API keys and users."""

    REVIEWER = "reviewer"
    ADMIN = "admin"


class VerificationOutcome(StrEnum):
    """Whether what was done matches the session's declared intent (product reference §6)."""

    VERIFIED = "VERIFIED"
    DRIFT_DETECTED = "DRIFT_DETECTED"
    UNVERIFIED = "UNVERIFIED"  # the check could not be made (no verifier, or it failed): never the agent's fault


class DriftResponse(StrEnum):
    """What an organisation wants done when drift is detected: record it only, have a human review the
    action (an after-execution approval; rejecting it undoes the action), or roll the session back."""

    NONE = "none"
    REVIEW = "review"
    ROLLBACK = "rollback"


class EventType(StrEnum):
    """What AgentRein tells the world about, through ``agentrein_notify`` plugins and webhooks."""

    APPROVAL_REQUESTED = "approval.requested"
    APPROVAL_DECIDED = "approval.decided"
    ROLLBACK_COMPLETED = "rollback.completed"
    ROLLBACK_FAILED = "rollback.failed"
    DRIFT_DETECTED = "drift.detected"


class WebhookFormat(StrEnum):
    """``json``: the event as it is; ``slack``: a Slack-compatible message (``text``, with a link)."""

    JSON = "json"
    SLACK = "slack"


class DeliveryStatus(StrEnum):
    PENDING = "PENDING"  # not yet delivered; tried again at ``due_at``
    DELIVERED = "DELIVERED"
    FAILED = "FAILED"  # gave up after the last retry

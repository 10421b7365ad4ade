"""What readers are shown: a session with its actions and derived display status, an approval with what a
reviewer needs beside it. The SDK returns these, and the server sends them as camelCase JSON."""

from __future__ import annotations

from datetime import datetime

from attrs import frozen

from agentrein_core.model import Action, Approval, Verification
from agentrein_core.statuses import (
    ActionStatus,
    ApprovalPurpose,
    ApprovalStatus,
    DisplayStatus,
    OperationType,
    SessionStatus,
)


@frozen
class SessionInfo:
    """A session as read: ``status`` is stored, ``display_status`` derived; ``actions`` in ``seq`` order."""

    id: str
    agent_id: str
    intent: str
    sandbox: bool
    status: SessionStatus
    display_status: DisplayStatus
    created_at: datetime
    last_activity_at: datetime
    completed_at: datetime | None
    actions: list[Action]
    approvals: list[Approval]
    #: The check of the session as a whole against its intent (made when it completes); each action carries
    #: its own as ``action.verification``. Read by ``get_session`` only (lists leave them out).
    verification: Verification | None = None


@frozen
class ApprovalInfo:
    """One approval request with the fields of the status reference §4, and its ``purpose``."""

    approval_id: str
    action_id: str
    api_name: str
    operation_type: OperationType
    session_id: str
    agent_id: str
    payload_summary: str
    requested_at: datetime
    timeout_at: datetime
    time_remaining: float  # seconds until timeout_at; 0 once decided
    status: ApprovalStatus
    resolved_at: datetime | None
    resolved_by: str | None
    reason: str | None
    action_status: ActionStatus
    unconfirmed: bool
    #: Not among the fields the status reference fixes for ``GET /approvals``: that list carries it only when
    #: asked (``?include=purpose``, as the SDK does).
    purpose: ApprovalPurpose | None = None
    #: What the session's agent declared it was doing, for the reviewer to judge the action against.
    session_intent: str = ""


@frozen
class SessionPage:
    """One page of sessions; ``next_cursor`` fetches the next (``None``: this was the last)."""

    sessions: list[SessionInfo]
    next_cursor: str | None

"""What readers are shown: a session with its actions and derived display status, an approval with what a
reviewer needs beside it, the write-ahead record of a call. The SDK returns these, and the server sends them
as camelCase JSON. Built from records alone (no database here), so an HTTP client can import them cheaply."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any, Literal, get_args

from attrs import Factory, asdict, evolve, field, frozen

from agentrein_core import rules
from agentrein_core.model import (
    JSON,
    Action,
    ApiKey,
    Approval,
    Rollback,
    Session,
    UndoConfig,
    UndoHandoff,
    Verification,
)
from agentrein_core.statuses import (
    ActionStatus,
    ApprovalPurpose,
    ApprovalStatus,
    DisplayStatus,
    OperationType,
    SessionStatus,
)


@frozen
class SessionSummary:
    """A session as a list shows it: ``status`` is stored, ``display_status`` derived, and how many actions it
    holds, not the actions themselves (read the session for those), so that a page of a list costs the same
    whatever its sessions hold."""

    id: str
    agent_id: str
    intent: str
    sandbox: bool
    status: SessionStatus
    display_status: DisplayStatus
    created_at: datetime
    last_activity_at: datetime
    completed_at: datetime | None
    action_count: int
    #: Which client recorded it, when not one of AgentRein's own (:attr:`Session.recorded_with`).
    recorded_with: str | None = field(default=None, kw_only=True)


@frozen
class SessionInfo(SessionSummary):
    """A session as read: its summary, with its ``actions`` in ``seq`` order and its approvals."""

    actions: list[Action]
    approvals: list[Approval]
    #: The check of the session as a whole against its intent (made when it completes); each action carries
    #: its own as ``action.verification``. Read by ``get_session`` only (lists leave them out).
    verification: Verification | None = None
    #: Where the actions not in ``actions`` start, for ``GET /sessions/{id}/actions?cursor=``: the server's
    #: ``GET /sessions/{id}`` shows the first page of a long session's actions (``action_count`` says how many
    #: there are in all). ``None``: ``actions`` holds them all (the SDKs' ``get_session`` always reads them all).
    actions_cursor: str | None = None


@frozen
class UndoStep:
    """One action a decision sets a rollback on, in the order the rollback deals with it (last done first):
    ``undo`` says how it is undone; ``None`` means it stays as it is, and ``stays`` says why."""

    action_id: str
    seq: int
    action: str
    undo: str | None
    stays: str | None = None
    #: Its undo first waits for a reviewer's approval (a ``ROLLBACK`` approval).
    waits_for_approval: bool = False


@frozen
class Effect:
    """What one decision does: a sentence, and the actions whose undo it sets off (``steps``, last done
    first: the first :data:`~agentrein_core.decisions.SHOWN_STEPS`, and how many more there are, ``more_steps``,
    so that a card costs the same however long the session). ``irreversible``: what stays after this decision
    cannot be taken back (warn the reviewer)."""

    summary: str
    steps: list[UndoStep] = field(factory=list)
    irreversible: bool = False
    more_steps: int = 0


@frozen
class Consequences:
    """What approving and what rejecting a pending request would each do."""

    approve: Effect
    reject: Effect


@frozen
class Explanation:
    """What a reviewer reads beside an approval, as the engine explains it (:mod:`agentrein_core.decisions`
    answers, :mod:`agentrein_core.wording` says it): the action in its connector's words, the host its call goes
    to, and what the decision would do (while pending) or did (once decided)."""

    description: str
    target_host: str | None
    consequences: Consequences | None
    outcome: str | None


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
    #: The action's connector; what the action does in its connector's plain words ("Delete order ord_14 on
    #: api.example.com"), the host its call goes to (when the record says) and its payload as recorded
    #: (redacted). ``None`` in an event's copy, which leaves them out.
    connector: str = ""
    description: str | None = None
    target_host: str | None = None
    payload: JSON | None = None
    #: While pending: what approving and what rejecting would each do, computed from the rules.
    consequences: Consequences | None = None
    #: Once decided: what the decision did, as things stand now ("Approved: the agent's call ran.").
    outcome: str | None = None
    #: Before execution: when the agent had stopped waiting for the decision, as of now (pending) or of the
    #: decision; ``None`` while it waits (a long-poll of its open, or ended moments ago: ``rules.WAITER_GRACE``),
    #: and for the other purposes. Approving a request nobody waits for lets nothing run.
    agent_stopped_waiting_at: datetime | None = None

    @property
    def blocking(self) -> bool:
        """Someone waits for this decision: the agent's call (before execution) or a rollback (its undo)."""
        return self.purpose in rules.BLOCKING_PURPOSES


#: The fields of :class:`ApprovalInfo` beyond the status reference's list, by their wire names: ``GET
#: /approvals?include=NAME`` adds each (``GET /approvals/{id}`` has them all).
IncludedField = Literal[
    "purpose",
    "sessionIntent",
    "connector",
    "description",
    "targetHost",
    "payload",
    "consequences",
    "outcome",
    "agentStoppedWaitingAt",
]
INCLUDED_FIELDS: tuple[str, ...] = get_args(IncludedField)
#: The fields of ``GET /approvals``, exactly as the status reference §4 lists them (``agentrein approvals
#: --json`` on a database shows the same ones).
LISTED_FIELDS = (
    "approvalId",
    "actionId",
    "apiName",
    "operationType",
    "sessionId",
    "agentId",
    "payloadSummary",
    "requestedAt",
    "timeoutAt",
    "timeRemaining",
    "status",
    "resolvedAt",
    "resolvedBy",
    "reason",
    "actionStatus",
    "unconfirmed",
)


@frozen
class HandedUndo:
    """An undo handed to the calling agent process (DESIGN §4a), as it takes it: the action to undo and the
    lease under which it runs the undo and reports (``handoff.lease_id``, until ``handoff.leased_until``)."""

    handoff: UndoHandoff
    action: Action


@frozen
class UndoWithAgent:
    """The undo a rollback waits on while the agent's process has it (DESIGN §4a: the server cannot reach the
    service): offered until ``offered_until`` to the process that wrapped the client, then ``taken``, and
    reported by ``report_by`` or failed. Nothing of the lease itself, which is that process's alone."""

    action_id: str
    connector: str
    offered_at: datetime
    offered_until: datetime
    taken: bool
    report_by: datetime | None

    @classmethod
    def of(cls, handoff: UndoHandoff) -> UndoWithAgent:
        taken = handoff.lease_id is not None and handoff.leased_until is not None
        report_by = handoff.leased_until if taken else None
        return cls(handoff.action_id, handoff.connector, handoff.offered_at, handoff.claim_by, taken, report_by)


@frozen
class RollbackInfo(Rollback):
    """A rollback job as read: the job, and the undo it waits on in the agent's process, if any
    (``undo_with_agent``), so that whoever follows it is told why it does not move."""

    undo_with_agent: UndoWithAgent | None = None


@frozen
class SessionPage:
    """One page of sessions; ``next_cursor`` fetches the next (``None``: this was the last)."""

    sessions: list[SessionSummary]
    next_cursor: str | None


@frozen
class ActionPage:
    """One page of a session's actions, in ``seq`` order; ``next_cursor`` fetches the next (``None``: this was
    the last)."""

    actions: list[Action]
    next_cursor: str | None


#: The fields of :class:`ApprovalInfo` that need the approval's session read and explained (its actions and
#: rollbacks, the connectors' words): a list that includes none of them reads less.
EXPLAINED_FIELDS = frozenset({"description", "targetHost", "payload", "consequences", "outcome"})


@frozen
class ApprovalPage:
    """One page of approvals; ``next_cursor`` fetches the next (``None``: this was the last)."""

    approvals: list[ApprovalInfo]
    next_cursor: str | None


#: The most confirmations one write-ahead record carries.
MAX_CONFIRMATIONS = 100


@frozen
class Confirmation:
    """A recorded call that succeeded, as the agent reports it: its (redacted) result and how to undo it."""

    action_id: str
    response: JSON | None = None
    undo: UndoConfig | None = None


@frozen
class RefusedConfirmation:
    """A confirmation carried with a write-ahead record that could not be applied, and why (the action stays
    as it was). ``settled``: the action was confirmed already, so this one was sent twice and nothing is lost;
    otherwise the call's success is not on record, and the SDK keeps the confirmation aside with ``detail``."""

    action_id: str
    detail: str
    settled: bool = False


@frozen
class LoggedAction:
    """The write-ahead record of a call, and its before-execution approval when it must wait for one; and
    the confirmations carried with it that could not be applied."""

    action: Action
    approval: Approval | None
    refused_confirmations: list[RefusedConfirmation] = Factory(list)


def session_info(
    session: Session,
    actions: list[Action],
    approvals: list[Approval],
    checks: Iterable[Verification] | None = None,
) -> SessionInfo:
    """The session as read; ``checks`` (its intent verifications), when given, are shown on each action and
    on the session."""
    summary = session_summary(session, rules.display_status(session, actions, approvals), len(actions))
    return session_read(summary, actions, approvals, checks)


def session_read(
    summary: SessionSummary,
    actions: list[Action],
    approvals: list[Approval],
    checks: Iterable[Verification] | None = None,
    actions_cursor: str | None = None,
) -> SessionInfo:
    """The session of ``summary`` as read with ``actions`` (all of them, or the first page, the rest starting
    at ``actions_cursor``) and ``approvals``; ``checks``, when given, shown on each action and on the session."""
    of_session = None
    if checks is not None:
        checks = list(checks)
        actions = checked(actions, checks)
        of_session = next((v for v in reversed(checks) if v.action_id is None), None)
    return SessionInfo(
        **asdict(summary, recurse=False),
        actions=actions,
        approvals=approvals,
        verification=of_session,
        actions_cursor=actions_cursor,
    )


def checked(actions: list[Action], checks: Iterable[Verification]) -> list[Action]:
    """``actions``, each with its intent check among ``checks`` (the latest, when it has several)."""
    by_action = {v.action_id: v for v in checks}
    return [evolve(a, verification=by_action[a.action_id]) if a.action_id in by_action else a for a in actions]


def session_summary(session: Session, display_status: DisplayStatus, action_count: int) -> SessionSummary:
    """The session as a list shows it, with its ``display_status`` and ``action_count`` (worked out in SQL for
    a list, from its actions for a session read whole)."""
    return SessionSummary(
        id=session.session_id,
        agent_id=session.agent_id,
        intent=session.intent,
        sandbox=session.sandbox,
        status=session.status,
        display_status=display_status,
        created_at=session.created_at,
        last_activity_at=session.last_activity_at,
        completed_at=session.completed_at,
        action_count=action_count,
        recorded_with=session.recorded_with,
    )


def approval_info(
    approval: Approval,
    action: Action,
    session: Session,
    now: datetime,
    explained: Explanation | None = None,
) -> ApprovalInfo:
    """The approval as read; ``explained`` adds what the reviewer reads on a card: the action in words and
    what the decision does or did."""
    remaining = (approval.timeout_at - now).total_seconds() if approval.status is ApprovalStatus.PENDING else 0.0
    info = ApprovalInfo(
        approval_id=approval.approval_id,
        action_id=action.action_id,
        api_name=action.api_name,
        operation_type=action.operation_type,
        session_id=session.session_id,
        agent_id=session.agent_id,
        purpose=approval.purpose,
        payload_summary=summarise(action),
        requested_at=approval.requested_at,
        timeout_at=approval.timeout_at,
        time_remaining=max(0.0, remaining),
        status=approval.status,
        resolved_at=approval.resolved_at,
        resolved_by=approval.resolved_by,
        reason=approval.reason,
        action_status=action.status,
        unconfirmed=rules.is_unconfirmed(action, approval, now),
        agent_stopped_waiting_at=rules.stopped_waiting(approval, approval.resolved_at or now),
        session_intent=session.intent,
        connector=action.connector,
    )
    if explained is None:
        return info
    return evolve(
        info,
        description=explained.description,
        target_host=explained.target_host,
        payload=action.payload,
        consequences=explained.consequences,
        outcome=explained.outcome,
    )


def api_key_shown(key: ApiKey) -> dict[str, Any]:
    """A key as shown, never its secret (``GET /api-keys`` answers so, and ``agentrein keys`` on a database
    shows keys the same way)."""
    return {
        "keyId": key.key_id,
        "role": key.role,
        "prefix": key.prefix,
        "createdAt": key.created_at.isoformat(),
        "revokedAt": key.revoked_at.isoformat() if key.revoked_at else None,
    }


def queue_order(pending: Iterable[ApprovalInfo]) -> list[ApprovalInfo]:
    """The order a reviewer works in: the requests someone waits for first (the agent, a rollback), least time
    left first; then after-execution reviews, least time left first."""
    return sorted(pending, key=lambda p: (not p.blocking, p.timeout_at, p.approval_id))


def summarise(action: Action, limit: int = 240) -> str:
    """A one-line, human-readable summary of what an action does, for reviewers."""
    body = json.dumps(action.payload, separators=(", ", ": "), sort_keys=True, default=str)
    return shortened(f"{action.operation_type} {action.api_name} {body}", limit)


def shortened(text: str, limit: int) -> str:
    """``text``, cut to ``limit`` characters (the last an ellipsis) when longer."""
    return text if len(text) <= limit else text[: limit - 1] + "…"

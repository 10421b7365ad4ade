"""What one use case causes in another area, as functions over ``(tx, now)`` run in the caller's
transaction: a failure rolls the session back, an approval opens (and is announced), a decision has its
consequences (whether a reviewer or an expiry made it), reviews of an undone action close, an event is
recorded with its webhook deliveries, an intent check is queued.

These are the engine's only ties between areas; each is one place, so a rule like "a failure rolls the
session back" is written once, whichever use case the failure came through.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from attrs import evolve

import agentrein_core.engine.validation as validation
from agentrein_core import rules
from agentrein_core.converter import to_wire
from agentrein_core.engine.records import (
    action_of,
    read_approval,
    replace,
    session_of,
    set_action,
    set_session_status,
)
from agentrein_core.errors import InvalidTransitionError
from agentrein_core.ids import new_id
from agentrein_core.model import JSON, Action, Approval, Delivery, Event, Rollback, Session, Verification
from agentrein_core.read_models import approval_info
from agentrein_core.statuses import (
    ActionStatus,
    ApprovalPurpose,
    ApprovalStatus,
    DeliveryStatus,
    EventType,
    RollbackStatus,
    SessionStatus,
    UndoStatus,
)
from agentrein_core.store import Change, Tx

#: Who decides approvals that expire or are closed by a rollback, and requests the rollbacks failures start.
SYSTEM = "agentrein"
NO_GATES_REASON = "the organisation's plan has no approval gates (upgrade to 'team' to require approvals)"


def blocked_by(policy_name: str) -> str:
    """What a write-ahead record a ``BLOCK`` policy refused says (its error)."""
    return f"blocked by policy {policy_name!r}"


#: The longest a rollback's trigger (why it started) may be.
MAX_TRIGGER = 200


# approvals ----------------------------------------------------------------------------------------------
def new_approval(
    action: Action,
    purpose: ApprovalPurpose,
    now: datetime,
    timeout: timedelta,
    rollback_id: str | None = None,
) -> Approval:
    validation.approval_timeout(timeout)
    return Approval(
        approval_id=new_id("apr"),
        org_id=action.org_id,
        session_id=action.session_id,
        action_id=action.action_id,
        purpose=purpose,
        status=ApprovalStatus.PENDING,
        requested_at=now,
        timeout_at=now + timeout,
        rollback_id=rollback_id,
    )


def open_approval(tx: Tx, now: datetime, approval: Approval) -> None:
    tx.insert(approval)
    tx.announce(Change.APPROVAL)
    emit(tx, now, approval.org_id, EventType.APPROVAL_REQUESTED, to_wire(read_approval(tx, approval, now)))


def close_reviews(
    tx: Tx, now: datetime, action: Action, reason: str, pending: Sequence[Approval] | None = None
) -> None:
    """An action that is rolled back (or failed before its approval was decided) needs no review any more:
    close what still asks about it, saying why (``reason``): its ``pending`` approvals, if the caller held them
    already (:meth:`~agentrein_core.store.approvals.Approvals.hold_pending_of`)."""
    for approval in tx.approvals.hold_pending_of(action.action_id) if pending is None else pending:
        closed = evolve(approval, status=ApprovalStatus.REJECTED, resolved_at=now, resolved_by=SYSTEM, reason=reason)
        replace(tx, closed, status=ApprovalStatus.PENDING)
        tx.announce(Change.DECISION)  # a long-poll waiting on it answers now
        emit(tx, now, closed.org_id, EventType.APPROVAL_DECIDED, to_wire(read_approval(tx, closed, now)))


# events -------------------------------------------------------------------------------------------------
def emit(tx: Tx, now: datetime, org_id: str, type_: EventType, data: JSON) -> None:
    """Record an event with the change it reports, and a delivery for each webhook that wants it."""
    event = Event(new_id("evt"), org_id, type_, data, now)
    tx.insert(event)
    for hook in tx.webhooks.of_org(org_id):
        if type_.value in hook.events or "*" in hook.events:
            delivery = Delivery(
                new_id("dlv"), org_id, hook.webhook_id, event.event_id, type_, DeliveryStatus.PENDING, now, due_at=now
            )
            tx.insert(delivery)


def rollback_ended(tx: Tx, now: datetime, job: Rollback) -> None:
    ended = EventType.ROLLBACK_COMPLETED if job.status is RollbackStatus.SUCCEEDED else EventType.ROLLBACK_FAILED
    shown = {k: v for k, v in to_wire(job).items() if k not in ("leaseToken", "leaseUntil")}
    emit(tx, now, job.org_id, ended, shown)
    tx.announce(Change.ROLLBACK)


# intent checks ------------------------------------------------------------------------------------------
def queue_check(tx: Tx, now: datetime, org_id: str, session_id: str, action_id: str | None) -> None:
    """Queue a check of an action (or, ``action_id`` None, of a whole session) against the intent, due now."""
    tx.insert(Verification(new_id("ver"), org_id, session_id, action_id, created_at=now, due_at=now))


# rollbacks ----------------------------------------------------------------------------------------------
def finished(status: RollbackStatus, now: datetime) -> dict[str, object]:
    """The columns of a rollback job that has ended with ``status``."""
    return {"status": status, "finished_at": now, "lease_token": None, "lease_until": None}


def rollback_under_way(tx: Tx, session_id: str) -> Rollback | None:
    """The session's unfinished rollback, as a whole-session one: a one-action rollback under way (an
    after-execution rejection) is widened to the whole session, so a session rollback asked for now is not
    lost when that one action is undone. Holds the session's row first (the store's lock order), so that two
    transactions never both find none and then wait on each other's new rollback."""
    tx.sessions.hold(session_id)
    running = tx.rollbacks.active(session_id)
    if running is not None and not running.whole_session:
        running = tx.rollbacks.update(running.rollback_id, {"whole_session": True}, status=running.status)
    return running


def hold_before_rollback(tx: Tx, session: Session) -> None:
    """Hold, before the session's row, what starting its rollback writes besides: a sandbox session's rollback
    flips its actions and closes their reviews at once (:func:`start_rollback`), so it holds those first, in
    the store's lock order (a decision on one of them holds its approval, then its action, then the session)."""
    if session.sandbox:
        tx.approvals.hold_pending_in(session.session_id)
        tx.actions.hold_of_session(session.session_id)


def may_start_rollback(tx: Tx, session: Session) -> bool:
    """No rollback under way, and something to undo."""
    under_way = rollback_under_way(tx, session.session_id)
    return under_way is None and any(a.status in rules.UNDOABLE for a in tx.actions.of_session(session.session_id))


def start_rollback(
    tx: Tx,
    now: datetime,
    session: Session,
    requested_by: str,
    trigger: str,
    *,
    whole_session: bool = True,
    approval_timeout: timedelta | None = None,
) -> Rollback:
    """Start a rollback job (a worker runs it); a sandbox session's is done at once, in this transaction.
    Holds the session's row first, as :func:`rollback_under_way` does (the store's lock order)."""
    tx.sessions.hold(session.session_id)
    job = Rollback(
        rollback_id=new_id("rbk"),
        org_id=session.org_id,
        session_id=session.session_id,
        status=RollbackStatus.RUNNING,
        trigger=validation.text("trigger", trigger, MAX_TRIGGER),
        requested_by=requested_by,
        created_at=now,
        whole_session=whole_session,
        approval_timeout_ms=round(approval_timeout.total_seconds() * 1000) if approval_timeout else None,
    )
    if session.sandbox:
        return _sandbox_rollback(tx, now, session, job)
    tx.announce(Change.ROLLBACK)
    return tx.rollbacks.insert(job)


def _sandbox_rollback(tx: Tx, now: datetime, session: Session, job: Rollback) -> Rollback:
    """Sandbox sessions ran nothing real: flip every SUCCESS and PENDING_APPROVAL action (or those a
    reviewer asked to undo) to ROLLED_BACK in this one transaction; no inverse runs."""
    flipped = (ActionStatus.SUCCESS, ActionStatus.PENDING_APPROVAL)
    for action in tx.actions.of_session(session.session_id):
        if action.status in flipped and (job.whole_session or action.undo_requested):
            rolled_back = set_action(tx, action, now, status=ActionStatus.ROLLED_BACK)
            close_reviews(tx, now, rolled_back, "sandbox session rolled back")
    if job.whole_session:
        actions = tx.actions.of_session(session.session_id)
        set_session_status(tx, session, rules.session_status_after_rollback(session, actions))
    done = evolve(job, status=RollbackStatus.SUCCEEDED, finished_at=now)
    tx.insert(done)
    rollback_ended(tx, now, done)
    return done


def undo_late_success(tx: Tx, now: datetime, action: Action, *, recorded_after_it_ran: bool = False) -> None:
    """``action`` was just confirmed ``SUCCESS``. A session rollback under way undoes it in its turn (the chain
    is read afresh at every step). One that has ended, successfully, after the call was recorded could not
    undo it (a ``CLEARED`` action is never undone), and the session must not be left with this call's effect
    in place: it is rolled back again, which undoes this call (and only what is still executed). The agent's
    confirmations may arrive after its next request (the SDK sends them with it), so this is the ordinary
    case of an operator's rollback that started in between, not a rare race. A rollback that failed is left to
    the operator, whose next rollback includes this call.

    ``recorded_after_it_ran``: a call recorded only once it had run (journaled while AgentRein was away, or
    reported by a published SDK) may have run at any time before its record: whatever rollback of the session
    ended before the record, this call's effect is not to stay. Nor when a failure reported before it ended the
    session with nothing to undo yet (``FAILED``, no rollback): the published npm SDK sends a success's log
    without awaiting it, so the next call's failure log can overtake it."""
    latest = tx.rollbacks.latest(action.session_id)
    if latest is None and recorded_after_it_ran:
        session = session_of(tx, action.org_id, action.session_id)
        if session.status is SessionStatus.FAILED:
            start_rollback(
                tx, now, session, SYSTEM, f"{action.api_name} reported after the session failed"[:MAX_TRIGGER]
            )
        return
    if (
        latest is None
        or not latest.whole_session
        or latest.status is not RollbackStatus.SUCCEEDED
        # recorded after that rollback through a write-ahead record: the agent's work since
        or (latest.created_at < action.created_at and not recorded_after_it_ran)
    ):
        return
    session = session_of(tx, action.org_id, action.session_id)
    start_rollback(
        tx, now, session, SYSTEM, f"{action.api_name} confirmed after the session was rolled back"[:MAX_TRIGGER]
    )


def undo_alone(tx: Tx, now: datetime, session: Session, action: Action, requested_by: str, trigger: str) -> None:
    """Undo ``action`` alone, the rest of its session staying: after a rejected after-execution review, or a
    call reported after it ran that a ``BLOCK`` policy refuses."""
    set_action(tx, action, now, undo_requested=True)
    start_rollback(tx, now, session, requested_by, trigger[:MAX_TRIGGER], whole_session=False)


def after_failure(tx: Tx, now: datetime, session: Session, trigger: str, requested_by: str) -> None:
    """A failure rolls the session back; with nothing to undo the session simply becomes FAILED."""
    if rollback_under_way(tx, session.session_id) is not None:
        return
    if any(a.status in rules.UNDOABLE for a in tx.actions.of_session(session.session_id)):
        start_rollback(tx, now, session, requested_by, trigger)
    elif SessionStatus.FAILED in rules.SESSION_TRANSITIONS[session.status]:
        set_session_status(tx, session, SessionStatus.FAILED)


def after_agent_failure(tx: Tx, now: datetime, session: Session, trigger: str) -> None:
    """A call the agent reports failed rolls its session back while the session is ``ACTIVE``. A report
    that arrives after the session ended is recorded only: the agent's right to roll back ends with the
    session (status reference §3); an operator decides."""
    if session.status is SessionStatus.ACTIVE:
        after_failure(tx, now, session, trigger, SYSTEM)


# decisions ----------------------------------------------------------------------------------------------
def already_decided(approval: Approval) -> InvalidTransitionError:
    """The refusal to decide (or withdraw) ``approval`` again: who decided it, and why."""
    by = f" by {approval.resolved_by}" if approval.resolved_by else ""
    why = f": {approval.reason}" if approval.reason else ""
    return InvalidTransitionError(f"approval {approval.approval_id} was already {approval.status}{by}{why}")


def apply_decision(
    tx: Tx, now: datetime, approval: Approval, status: ApprovalStatus, reviewer: str, reason: str | None
) -> Approval:
    """Decide ``approval`` and carry out what the decision means for its action (status reference §4)."""
    if approval.status is not ApprovalStatus.PENDING:
        raise already_decided(approval)
    # A decision may start a rollback, which in a sandbox session is done at once: held first, as an operator's is.
    hold_before_rollback(tx, session_of(tx, approval.org_id, approval.session_id))
    decided = evolve(approval, status=status, resolved_at=now, resolved_by=reviewer, reason=reason)
    replace(tx, decided, status=ApprovalStatus.PENDING)
    tx.announce(Change.DECISION)
    action = action_of(tx, approval.org_id, approval.action_id)
    session = session_of(tx, approval.org_id, approval.session_id)
    emit(tx, now, approval.org_id, EventType.APPROVAL_DECIDED, to_wire(approval_info(decided, action, session, now)))
    approved = status is ApprovalStatus.APPROVED
    purpose = approval.purpose
    if purpose is ApprovalPurpose.BEFORE_EXECUTION:
        if approved:
            set_action(tx, action, now, status=ActionStatus.CLEARED)
        else:
            why = f"approval {status.lower()}" + (f": {reason}" if reason else "")
            set_action(tx, action, now, status=ActionStatus.FAILED, error=why)
            after_failure(tx, now, session, f"before-execution approval {status.lower()}", reviewer)
    elif purpose is ApprovalPurpose.AFTER_EXECUTION:
        if status is ApprovalStatus.REJECTED and action.status in rules.UNDOABLE:
            undo_alone(tx, now, session, action, reviewer, "after-execution approval rejected")
    elif purpose is ApprovalPurpose.ROLLBACK:
        job = tx.rollbacks.get(approval.org_id, approval.rollback_id or "")
        if approved:
            if job is not None and job.status is RollbackStatus.WAITING_APPROVAL:
                replace(tx, evolve(job, status=RollbackStatus.RUNNING), status=job.status)
                tx.announce(Change.ROLLBACK)
        else:
            set_action(tx, action, now, undo_status=UndoStatus.DECLINED)
            set_session_status(tx, session, SessionStatus.FAILED)
            if job is not None and job.status in rules.ROLLBACK_UNDER_WAY:
                finished = evolve(
                    job,
                    status=RollbackStatus.FAILED,
                    finished_at=now,
                    error=f"rollback approval for {action.api_name} {status.lower()}",
                    lease_token=None,
                    lease_until=None,
                )
                replace(tx, finished, status=job.status)
                rollback_ended(tx, now, finished)
    return decided

"""The plain-language sentences shown to people: the dashboard and the command line share them, so the same
thing is said the same way in both.

A status is said as a label in words naming what it is the status of ("Call: succeeded", "Undo: not undone
yet"), the colour that agrees with what it means to the reader, and, where the status alone would leave a
question, why ("a delete has no inverse"). The stored value (what the REST API and the command line show) is
kept in the pill's title. The meanings are the status reference's
(DESIGN.md §4): ``NONE`` is an undo not attempted, ``SKIPPED`` one whose type is ``none``, ``CLEARED`` a
call cleared to run whose execution is not confirmed yet."""

from __future__ import annotations

from attrs import frozen

from agentrein_core.model import Action, Approval, Rollback, Verification
from agentrein_core.read_models import SessionInfo, SessionSummary
from agentrein_core.rules import ROLLBACK_UNDER_WAY, UNDOABLE
from agentrein_core.statuses import (
    ActionStatus,
    ApprovalPurpose,
    ApprovalStatus,
    DisplayStatus,
    OperationType,
    RollbackStatus,
    UndoStatus,
    VerificationOutcome,
)

GOOD, BAD, WAIT, PLAIN = "good", "bad", "wait", "plain"


@frozen
class Label:
    """A pill: ``text`` in words, its colour family (``tone``), the ``stored`` value, and ``why`` beside it."""

    text: str
    tone: str
    stored: str
    why: str = ""


CALL = {
    ActionStatus.PENDING_APPROVAL: ("Call: waiting for approval", WAIT),
    ActionStatus.CLEARED: ("Call: cleared, not confirmed yet", WAIT),
    ActionStatus.SUCCESS: ("Call: succeeded", GOOD),
    ActionStatus.FAILED: ("Call: failed", BAD),
    ActionStatus.ROLLED_BACK: ("Call: rolled back", PLAIN),
    ActionStatus.ROLLBACK_FAILED: ("Call: succeeded, undo failed", BAD),
}

UNDO = {
    UndoStatus.SKIPPED: ("Undo: skipped", PLAIN),
    UndoStatus.IN_PROGRESS: ("Undo: running", WAIT),
    UndoStatus.AWAITING_APPROVAL: ("Undo: waiting for a reviewer", WAIT),
    UndoStatus.DONE: ("Undo: done", GOOD),
    UndoStatus.FAILED: ("Undo: failed", BAD),
    UndoStatus.DECLINED: ("Undo: declined by a reviewer", BAD),
}

ROLLBACK = {
    RollbackStatus.RUNNING: ("Rollback: running", WAIT),
    RollbackStatus.WAITING_APPROVAL: ("Rollback: waiting for a reviewer", WAIT),
    RollbackStatus.SUCCEEDED: ("Rollback: succeeded", GOOD),
    RollbackStatus.FAILED: ("Rollback: failed", BAD),
}

SESSION = {
    DisplayStatus.ROLLING_BACK: ("Rolling back", WAIT, "an undo is running or waits for a reviewer"),
    DisplayStatus.ROLLBACK_FAILED: ("Rollback failed", BAD, "an undo failed: the rollback stopped there"),
    DisplayStatus.AWAITING_APPROVAL: ("Waiting for approval", WAIT, "a request waits for a reviewer"),
    DisplayStatus.REVERTED: ("Reverted", GOOD, "every call that ran was undone"),
    DisplayStatus.PARTIALLY_REVERTED: ("Partially reverted", PLAIN, ""),  # why: see session()
    DisplayStatus.ACTIVE: ("Active", PLAIN, ""),
    DisplayStatus.COMPLETED: ("Completed", GOOD, ""),
    DisplayStatus.ABANDONED: ("Abandoned", PLAIN, "no activity for 24 hours"),
    DisplayStatus.FAILED: ("Failed", BAD, ""),
}

APPROVAL = {
    ApprovalStatus.PENDING: ("Waiting for a decision", WAIT),
    ApprovalStatus.APPROVED: ("Approved", GOOD),
    ApprovalStatus.REJECTED: ("Rejected", BAD),
    ApprovalStatus.EXPIRED: ("Expired: nobody decided in time", BAD),
}

CHECK = {
    VerificationOutcome.VERIFIED: ("Matches the intent", GOOD),
    VerificationOutcome.DRIFT_DETECTED: ("Drift from the intent", BAD),
    VerificationOutcome.UNVERIFIED: ("Not verified", PLAIN),
}

#: What a call that keeps its effect leaves behind, by what it did.
_STAYS = {
    OperationType.DELETE: "stays deleted",
    OperationType.CREATE: "stays created",
    OperationType.UPDATE: "stays changed",
}


def call(action: Action) -> Label:
    """The call's own status; one whose undo was skipped is no longer good news, only what stays."""
    text, tone = CALL[action.status]
    return Label(text, PLAIN if action.undo_status is UndoStatus.SKIPPED else tone, action.status)


def undo(action: Action, *, sandbox: bool = False) -> Label:
    """The undo of ``action``: what became of it, or, not attempted yet, what a rollback would do."""
    if action.undo_status is UndoStatus.SKIPPED:
        return Label("Undo: skipped", PLAIN, action.undo_status, stays(action))
    if action.undo_status is not UndoStatus.NONE:
        text, tone = UNDO[action.undo_status]
        return Label(text, tone, action.undo_status)
    stored = action.undo_status
    if action.status is ActionStatus.ROLLED_BACK:  # a sandbox's rollback ran no inverse: nothing real ran
        return Label("Undo: none needed", PLAIN, stored, "a sandbox session ran nothing real")
    if action.status is ActionStatus.FAILED:
        return Label("Undo: nothing to undo", PLAIN, stored, "a call that failed is not undone")
    if action.status is ActionStatus.PENDING_APPROVAL:
        return Label("Undo: nothing to undo yet", PLAIN, stored, "the call has not run")
    if action.status is ActionStatus.CLEARED:
        return Label("Undo: not undone", PLAIN, stored, "a call not confirmed as run is never undone")
    if sandbox:
        return Label("Undo: not undone yet", PLAIN, stored, "in a sandbox a rollback runs no inverse")
    if has_no_inverse(action):
        return Label("Undo: none possible", PLAIN, stored, no_inverse(action))
    waits = action.undo is not None and action.undo.require_approval
    return Label("Undo: not undone yet", PLAIN, stored, "in a rollback, it waits for a reviewer" if waits else "")


def step(action: Action, job: Rollback, *, sandbox: bool = False) -> Label:
    """An undo in the chain of rollback ``job``: done, skipped, failed, or still to come."""
    if action.undo_status is UndoStatus.NONE and action.status in UNDOABLE and not has_no_inverse(action):
        if job.status in ROLLBACK_UNDER_WAY:
            return Label("Undo: to run", WAIT, action.undo_status, "")
        return Label("Undo: not run", PLAIN, action.undo_status, "the rollback stopped before it")
    return undo(action, sandbox=sandbox)


def session(info: SessionSummary, *, under_review: bool | None = None) -> Label:
    """The session's display status; one whose only pending approvals are reviews of calls that already ran
    is under review (nothing waits): read with its approvals, or as a list says (``under_review``,
    ``Engine.sessions_under_review``); a partial revert read with its actions is red only when something went
    wrong, and says what stays (a list's summary, read without them, says it plainly)."""
    stored = info.display_status
    text, tone, why = SESSION[stored]
    if stored is DisplayStatus.AWAITING_APPROVAL:
        if under_review is None and isinstance(info, SessionInfo):
            pending = [p for p in info.approvals if p.status is ApprovalStatus.PENDING]
            under_review = bool(pending) and all(p.purpose is ApprovalPurpose.AFTER_EXECUTION for p in pending)
        if under_review:
            return Label("Under review", tone, stored, "a reviewer looks at calls that already ran")
    if stored is not DisplayStatus.PARTIALLY_REVERTED or not isinstance(info, SessionInfo):
        return Label(text, tone, stored, why)
    left = [a for a in info.actions if a.status is ActionStatus.SUCCESS]
    if any(a.undo_status is UndoStatus.DECLINED for a in left):
        return Label(text, BAD, stored, "a reviewer declined an undo: the rollback stopped there")
    staying = [a for a in left if a.undo_status is UndoStatus.SKIPPED or has_no_inverse(a)]
    if len(staying) == len(left):
        return Label(text, tone, stored, f"everything with an inverse was undone; {_stay(staying)}")
    return Label(text, tone, stored, f"{_count(len(left) - len(staying))} not undone")


def display_name(status: DisplayStatus) -> str:
    """A display status in words, as the sessions filter offers it."""
    return SESSION[status][0]


def rollback(job: Rollback) -> Label:
    text, tone = ROLLBACK[job.status]
    return Label(text, tone, job.status)


def approval(request: Approval) -> Label:
    text, tone = APPROVAL[request.status]
    return Label(text, tone, request.status)


def check(verification: Verification) -> Label:
    if verification.outcome is None:
        return Label("Checking", PLAIN, "", "")
    text, tone = CHECK[verification.outcome]
    return Label(text, tone, verification.outcome, verification.rationale or "")


def has_no_inverse(action: Action) -> bool:
    return action.undo is None or action.undo.is_none


def no_inverse(action: Action) -> str:
    """Why ``action`` cannot be undone."""
    if action.operation_type is OperationType.DELETE:
        return "a delete has no inverse"
    if action.operation_type is OperationType.OTHER:
        return f"{action.connector} knows no inverse for this kind of call"
    return "no inverse was recorded for this call"


def stays(action: Action) -> str:
    """``DELETE /v1/orders/ord_14 stays deleted: a delete has no inverse``."""
    return f"{action.api_name} {kept(action)}"


def kept(action: Action) -> str:
    """``stays deleted: a delete has no inverse``."""
    return f"{_STAYS.get(action.operation_type, 'stays as it is')}: {no_inverse(action)}"


def _stay(actions: list[Action]) -> str:
    if len(actions) == 1:
        return stays(actions[0])
    return f"{len(actions)} actions stay as they are: they have no inverse"


def duration(seconds: float) -> str:
    """``4m 05s left``-style text for a countdown (the dashboard's first paint; dashboard.js keeps it current)."""
    seconds = max(0, int(seconds))
    if seconds == 0:
        return "time is up"
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h left"
    if hours:
        return f"{hours}h {minutes:02d}m left"
    return f"{minutes}m {secs:02d}s left"


def _count(n: int) -> str:
    return f"{n} call{'s' if n != 1 else ''} that ran {'is' if n == 1 else 'are'}"

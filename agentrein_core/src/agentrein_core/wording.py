"""The plain-language sentences shown to people: the dashboard and the command line share them, so the same
thing is said the same way in both.

A status is said as a label in words naming what it is the status of ("Call: succeeded", "Undo: not undone
yet"), the colour that agrees with what it means to the reader, and, where the status alone would leave a
question, why ("a delete has no inverse"). The stored value (what the REST API and the command line show) is
kept in the pill's title. The meanings are the status reference's
(DESIGN.md §4): ``NONE`` is an undo not attempted, ``SKIPPED`` one whose type is ``none``, ``CLEARED`` a
call cleared to run whose execution is not confirmed yet.

What a reviewer's decision does is said here too: :mod:`agentrein_core.decisions` answers it as data (which
actions a rejection undoes, that an action has no inverse, ...), and :func:`consequences` and :func:`outcome`
say that data in sentences, in the connectors' words for each action (:func:`words_of`)."""

from __future__ import annotations

import logging
from datetime import datetime

from attrs import frozen

from agentrein_core.connector import (
    Connector,
    Undoable,
    UndoOutlook,
    plain_description,
    plain_undo,
    why_not_undone,
)
from agentrein_core.decisions import (
    SHOWN_STEPS,
    ActionKept,
    ActionStays,
    ActionUndone,
    ActionWords,
    AfterRefusal,
    AlreadyUndone,
    CallAllowed,
    CallNotRun,
    CallRefused,
    CallRuns,
    Decided,
    Describe,
    Fate,
    Forecast,
    Foreseen,
    RollbackGoesOn,
    RollbackProgress,
    StepAhead,
    StepsAhead,
    UndoAsked,
    UndoneLater,
)
from agentrein_core.model import Action, Approval, Rollback, UndoHandoff, Verification
from agentrein_core.read_models import Consequences, Effect, SessionInfo, SessionSummary, UndoStep, UndoWithAgent
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

log = logging.getLogger("agentrein")

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


def step(action: Action, job: Rollback, *, sandbox: bool = False, handoff: UndoHandoff | None = None) -> Label:
    """An undo in the chain of rollback ``job``: done, skipped, failed, or still to come; one under way that
    the job handed to the agent's process (``handoff``, not settled yet) says where it is there."""
    if handoff is not None and handoff.outcome is None and action.undo_status is UndoStatus.IN_PROGRESS:
        return with_agent(UndoWithAgent.of(handoff))
    if action.undo_status is UndoStatus.NONE and action.status in UNDOABLE and not has_no_inverse(action):
        if job.status in ROLLBACK_UNDER_WAY:
            return Label("Undo: to run", WAIT, action.undo_status, "")
        return Label("Undo: not run", PLAIN, action.undo_status, "the rollback stopped before it")
    return undo(action, sandbox=sandbox)


def with_agent(undo: UndoWithAgent) -> Label:
    """An undo a rollback waits on in the agent's process: offered to it, or running there."""
    if not undo.taken or undo.report_by is None:
        why = f"the process that wrapped its client takes it; offered until {_second(undo.offered_until)}"
        return Label("Undo: offered to the agent's process", WAIT, UndoStatus.IN_PROGRESS, why)
    why = f"it reports the outcome by {_second(undo.report_by)}, or the undo fails"
    return Label("Undo: running in the agent's process", WAIT, UndoStatus.IN_PROGRESS, why)


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


# what a decision does ----------------------------------------------------------------------------------
def words_of(connector: Connector | None, action: Action) -> ActionWords:
    """``action`` in its connector's words (``None``: a connector not installed where it is read, in the
    words its record gives). A connector whose words fail is read the same way: a plugin's bug must not
    take the approval queue down."""
    if connector is not None:
        try:
            if action.undo is None:
                undo = connector.foresee_undo(action)
            elif (why := why_not_undone(action.undo)) is not None:  # the record says why, not the connector
                undo = UndoOutlook(Undoable.NO, why)
            else:
                undone = Undoable.NO if action.undo.is_none else Undoable.YES
                undo = UndoOutlook(undone, connector.describe_undo(action))
            return ActionWords(connector.describe(action), connector.target_host(action), undo)
        except Exception:
            log.exception("connector %r could not describe action %s", connector.name, action.action_id)
    if action.undo is None:
        undo = UndoOutlook(Undoable.UNKNOWN, f"the {action.connector} connector is not installed here to say")
    else:
        undo = UndoOutlook(Undoable.NO if action.undo.is_none else Undoable.YES, plain_undo(action))
    return ActionWords(plain_description(action), None, undo)


def consequences(forecast: Forecast, words: Describe) -> Consequences:
    """What approving and what rejecting would each do (:func:`agentrein_core.decisions.foresee`), in words:
    each with the first :data:`~agentrein_core.decisions.SHOWN_STEPS` steps of the rollback it sets off, and
    how many more."""
    return Consequences(_effect(forecast.approve, words), _effect(forecast.reject, words))


def more_undos(n: int) -> str:
    """What a list of a rollback's first steps says of the ones it leaves out ("and 980 more undos")."""
    return f"and {n} more undo{'s' if n != 1 else ''}"


def earlier_undos(n: int) -> str:
    """What a running rollback's list, which starts a few steps before the one under way, says of those before."""
    return f"{n} undo{'s' if n != 1 else ''} dealt with before these"


_REFUSED = "The agent's call does not run (the agent is told it was rejected)"


def _effect(foreseen: Foreseen, words: Describe) -> Effect:
    """What one decision would do, as a sentence and the steps of the rollback it sets off."""
    irreversible = foreseen.irreversible
    if isinstance(foreseen, CallRuns):
        how = words(foreseen.action).undo.how
        if foreseen.undoable is Undoable.YES:
            summary = f"The agent's call runs. It can be undone later: {how}."
        elif foreseen.undoable is Undoable.NO:
            summary = f"The agent's call runs, and it cannot be undone: {how}."
        else:
            summary = f"The agent's call runs. Whether it can be undone is known only once it has run: {how}."
        if foreseen.sandbox:
            summary += " This is a sandbox session: rolling it back only marks its calls undone, running no inverse."
        return Effect(summary, irreversible=irreversible)
    if isinstance(foreseen, CallRefused):
        steps = foreseen.steps
        return _listed(_refused(foreseen.then, steps), steps, [], words, irreversible)
    if isinstance(foreseen, AlreadyUndone):
        happens = "Nothing more happens" if foreseen.rejecting else "Nothing changes"
        return Effect(f"{happens}: the action was already undone.")
    if isinstance(foreseen, ActionStays):
        how = words(foreseen.action).undo.how
        if foreseen.undoable is Undoable.NO:
            return Effect(f"The action stays done, and nothing can undo it: {how}.", irreversible=irreversible)
        return Effect(f"The action stays done; a rollback of the session would still undo it: {how}.")
    if isinstance(foreseen, ActionUndone):
        step = _undo_step(foreseen.step, words)
        if foreseen.step.fate is Fate.MARKED:
            return Effect("This one action is marked undone; no inverse runs (a sandbox session).", [step])
        if foreseen.step.fate is Fate.STAYS:
            summary = f"This one action cannot be undone ({step.stays}): it stays as it is; your rejection is recorded."
            return Effect(summary, [step], irreversible)
        waits = " Its undo first waits for a reviewer's approval." if step.waits_for_approval else ""
        return Effect(f"This one action is undone: {step.undo}.{waits}", [step])
    if isinstance(foreseen, RollbackGoesOn):
        step, n = _undo_step(foreseen.step, words), foreseen.rest.count
        then = f"; then {_actions(n)} {_verb(n, 'is', 'are')} still to undo, last done first" if n else ""
        summary = f"The undo runs ({step.undo or step.stays}) and the rollback goes on{then}."
        return _listed(summary, foreseen.rest, [step], words)
    n = foreseen.rest.count
    also = f"; the {_actions(n)} left to undo {_verb(n, 'stays', 'stay')} as well" if n else ""
    summary = (
        f"The rollback stops here: the session is marked FAILED and this action stays done "
        f"({words(foreseen.action).description}){also}."
    )
    return _listed(summary, foreseen.rest, [], words)


def _listed(
    summary: str, steps: StepsAhead, first: list[UndoStep], words: Describe, irreversible: bool = False
) -> Effect:
    """An effect listing ``first``, then ``steps``, up to :data:`~agentrein_core.decisions.SHOWN_STEPS` in
    all, and counting the others."""
    listed = [*first, *(_undo_step(step, words) for step in steps.shown)][:SHOWN_STEPS]
    return Effect(summary, listed, irreversible, more_steps=len(first) + steps.count - len(listed))


def _refused(then: AfterRefusal, steps: StepsAhead) -> str:
    if then is AfterRefusal.ROLLBACK_UNDER_WAY:
        return f"{_REFUSED}; a rollback of the session is already under way."
    if then is AfterRefusal.NOTHING_DONE:
        return f"{_REFUSED}. Nothing was done before it, so nothing is undone; the session is marked FAILED."
    if then is AfterRefusal.NOTHING_LEFT:
        return f"{_REFUSED}. Nothing done before it is left to undo."
    stays = steps.staying
    undone = steps.count - stays
    kept = f"; {_actions(stays)} with no inverse {_verb(stays, 'stays as it is', 'stay as they are')}" if stays else ""
    return (
        f"{_REFUSED}, and the session is rolled back: {_actions(undone)} {_verb(undone, 'is', 'are')} undone, "
        f"last done first{kept}:"
    )


def _undo_step(step: StepAhead, words: Describe) -> UndoStep:
    """One step of the rollback a decision sets off, in its action's words."""
    action, said = step.action, words(step.action)
    if step.fate is Fate.UNDONE:
        return UndoStep(
            action.action_id, action.seq, said.description, said.undo.how, waits_for_approval=step.waits_for_approval
        )
    if step.fate is Fate.STAYS:
        return UndoStep(action.action_id, action.seq, said.description, None, said.undo.how)
    if step.fate is Fate.MARKED:
        return UndoStep(action.action_id, action.seq, said.description, "marked undone; no inverse runs (sandbox)")
    return UndoStep(action.action_id, action.seq, said.description, None, "the rollback stops before it")


def _actions(n: int) -> str:
    return "1 action" if n == 1 else f"{n} actions"


def _verb(n: int, one: str, many: str) -> str:
    return one if n == 1 else many


_DECIDED = {
    ApprovalStatus.APPROVED: "Approved",
    ApprovalStatus.REJECTED: "Rejected",
    ApprovalStatus.EXPIRED: "Expired (nobody decided in time)",
}


def outcome(decided: Decided | None, words: Describe) -> str | None:
    """What a decision did (:func:`agentrein_core.decisions.outcome`), in words; ``None`` while pending."""
    if decided is None:
        return None
    said = _DECIDED[decided.decided]
    if isinstance(decided, CallNotRun):
        return f"{said}: the agent's call did not run; {_rollback_after(decided.rollback)}."
    if isinstance(decided, CallAllowed):
        return f"{said}: {_call_after(decided)}."
    if isinstance(decided, UndoneLater):
        return f"{said}, then undone by {_rollback_named(decided.undone_by)}."
    if isinstance(decided, UndoAsked):
        return f"{said}: {_undo_after(decided.action, words)}."
    if isinstance(decided, ActionKept):
        return f"{said}: the action stays done."
    # RollbackStopped: an undo declined
    return f"{said}: the rollback stopped here; the session is FAILED and this action stays done."


def _call_after(allowed: CallAllowed) -> str:
    action = allowed.action
    if action.status is ActionStatus.CLEARED:
        if allowed.stopped_waiting_at is not None:
            return f"the agent had stopped waiting ({_minute(allowed.stopped_waiting_at)}), so its call has not run"
        return "the agent was told; its call is not confirmed as run yet"
    if action.status is ActionStatus.FAILED:
        return f"the agent's call ran and failed ({action.error or 'no error recorded'})"
    if action.status is ActionStatus.ROLLED_BACK:
        return f"the agent's call ran, and was undone by {_rollback_named(allowed.undone_by)}"
    if action.status is ActionStatus.ROLLBACK_FAILED:
        return f"the agent's call ran; a rollback could not undo it ({action.error or 'no error recorded'})"
    return "the agent's call ran"


def _rollback_after(progress: RollbackProgress) -> str:
    """What became of the session once a before-execution request was refused."""
    job, undone = progress.job, progress.undone
    if job is None:
        return "nothing was rolled back"
    if job.status is RollbackStatus.SUCCEEDED:
        stays = progress.dealt - undone
        kept = f", {stays} with no inverse left as {'it was' if stays == 1 else 'they were'}" if stays else ""
        return f"the session was rolled back ({undone} undone{kept})"
    if job.status is RollbackStatus.FAILED:
        return f"the session's rollback stopped ({undone} undone): {job.error or 'an undo failed'}"
    waiting = "; an undo waits for a reviewer's approval" if job.status is RollbackStatus.WAITING_APPROVAL else ""
    return f"the session is being rolled back ({undone} of {progress.dealt} undone so far{waiting})"


def _undo_after(action: Action, words: Describe) -> str:
    """Where the undo of an action stands, once a decision asked for it."""
    if action.status is ActionStatus.ROLLED_BACK:
        return f"the action was undone ({words(action).undo.how})"
    status = action.undo_status
    if status is UndoStatus.SKIPPED:
        return f"the action has no undo, so it stays as it is ({words(action).undo.how})"
    if status is UndoStatus.AWAITING_APPROVAL:
        return "its undo waits for a reviewer's approval"
    if status is UndoStatus.FAILED or action.status is ActionStatus.ROLLBACK_FAILED:
        return f"its undo failed ({action.error or 'no error recorded'})"
    if status is UndoStatus.DECLINED:
        return "its undo was declined, so it stays done"
    return "the action is being undone"


def _rollback_named(job: Rollback | None) -> str:
    """The rollback that undid an action: when it started, why, and who asked for it."""
    if job is None:
        return "a rollback"
    return f"the rollback of {_minute(job.created_at)} ({job.trigger}, requested by {job.requested_by})"


def _minute(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def _second(moment: datetime) -> str:
    return moment.strftime("%H:%M:%S UTC")

"""What a reviewer's decision does, as pure answers over records (the shape of :mod:`agentrein_core.rollback`):
before it is made, what approving and what rejecting a request would each do (:func:`foresee`); once it is
made, what it did (:func:`outcome`). Both follow the rules the engine applies (``engine.consequences.
apply_decision`` and the rollback chain of :mod:`agentrein_core.rollback`), so what a card promises is what
happens. The answers are data (which actions a rejection undoes, that an action has no inverse, which
rollback undid an action): :mod:`agentrein_core.wording` says them, in the connectors' words for each action
(:class:`ActionWords`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from enum import StrEnum

from attrs import evolve, field, frozen

from agentrein_core import rollback, rules
from agentrein_core.connector import Undoable, UndoOutlook
from agentrein_core.model import Action, Approval, Rollback, Session
from agentrein_core.statuses import ActionStatus, ApprovalPurpose, ApprovalStatus


@frozen
class ActionWords:
    """An action as a reviewer reads it, in its connector's words: what it does, the host it goes to (when its
    record says), and how it is undone (its recorded undo; before it ran, what the connector's rules say)."""

    description: str
    host: str | None
    undo: UndoOutlook


#: The words of each action, as the engine reads them through the installed connectors.
Describe = Callable[[Action], ActionWords]


class Fate(StrEnum):
    """What the rollback a decision sets off does with one action."""

    UNDONE = "undone"  #: its inverse runs
    STAYS = "stays"  #: it has no inverse, so it stays as it is
    MARKED = "marked"  #: a sandbox session's: marked undone, no inverse runs
    NOT_REACHED = "not reached"  #: the rollback stops before it


@frozen
class StepAhead:
    """One action a decision sets a rollback on, in the order the rollback deals with it (last done first)."""

    action: Action
    fate: Fate
    #: Its undo first waits for a reviewer's approval (a ``ROLLBACK`` approval).
    waits_for_approval: bool = False


# what a decision would do ------------------------------------------------------------------------------
@frozen
class CallRuns:
    """Approving a held call: it runs; ``undoable``, as its connector foresees it, says whether it can be
    undone later; in a ``sandbox`` session a rollback only marks it undone."""

    action: Action
    undoable: Undoable
    sandbox: bool

    @property
    def irreversible(self) -> bool:
        return self.undoable is Undoable.NO


class AfterRefusal(StrEnum):
    """What becomes of the session when a held call is refused."""

    ROLLBACK_UNDER_WAY = "rollback under way"  #: a rollback of the session runs already: no other starts
    NOTHING_DONE = "nothing done"  #: nothing was done before the call: nothing is undone, the session FAILED
    NOTHING_LEFT = "nothing left"  #: what was done before it is undone already
    ROLLED_BACK = "rolled back"  #: the session is rolled back: the steps say how


@frozen
class CallRefused:
    """Rejecting a held call: it does not run, and ``then`` says what becomes of the session."""

    then: AfterRefusal
    steps: list[StepAhead] = field(factory=list)

    @property
    def irreversible(self) -> bool:
        return any(step.fate is Fate.STAYS for step in self.steps)


@frozen
class AlreadyUndone:
    """A review of an action undone already: nothing changes, whichever the decision (``rejecting``)."""

    rejecting: bool

    @property
    def irreversible(self) -> bool:
        return False


@frozen
class ActionStays:
    """Approving a review: the action stays done; ``undoable`` says whether a rollback could still undo it."""

    action: Action
    undoable: Undoable

    @property
    def irreversible(self) -> bool:
        return self.undoable is Undoable.NO


@frozen
class ActionUndone:
    """Rejecting a review: this one action is undone (``step``); nothing else is rolled back."""

    step: StepAhead

    @property
    def irreversible(self) -> bool:
        return self.step.fate is Fate.STAYS


@frozen
class RollbackGoesOn:
    """Approving an undo: it runs (``step``), and the rollback goes on with the ``rest``."""

    step: StepAhead
    rest: list[StepAhead]

    @property
    def irreversible(self) -> bool:
        return False


@frozen
class RollbackStops:
    """Rejecting an undo: the rollback stops, the session is marked ``FAILED``, and ``action`` stays done, as do
    the ``rest`` it had left to undo."""

    action: Action
    rest: list[StepAhead]

    @property
    def irreversible(self) -> bool:
        return False


Foreseen = CallRuns | CallRefused | AlreadyUndone | ActionStays | ActionUndone | RollbackGoesOn | RollbackStops


@frozen
class Forecast:
    """What approving and what rejecting a pending request would each do."""

    approve: Foreseen
    reject: Foreseen


def reads_session(approval: Approval) -> bool:
    """Whether :func:`foresee` and :func:`outcome` read the actions of ``approval``'s session: a held call's
    do (pending: what a refusal rolls back; refused: how far that rollback went), as does a pending undo (the
    rest of its rollback). The others read only their own action and the session's rollbacks, so a page of
    approvals need not read those sessions' actions."""
    if approval.purpose is ApprovalPurpose.BEFORE_EXECUTION:
        return approval.status is not ApprovalStatus.APPROVED
    return approval.purpose is ApprovalPurpose.ROLLBACK and approval.status is ApprovalStatus.PENDING


def foresee(
    approval: Approval,
    action: Action,
    session: Session,
    actions: Sequence[Action],
    rollbacks: Sequence[Rollback],
    words: Describe,
) -> Forecast:
    """What approving and rejecting ``approval`` (of ``action``, in ``session`` with its ``actions`` and
    ``rollbacks``) would each do now; ``words`` tell whether a call not run yet could be undone."""
    if approval.purpose is ApprovalPurpose.BEFORE_EXECUTION:
        runs = CallRuns(action, words(action).undo.undoable, session.sandbox)
        return Forecast(runs, _call_refused(action, session, actions, rollbacks))
    if approval.purpose is ApprovalPurpose.AFTER_EXECUTION:
        if action.status not in rules.UNDOABLE:
            return Forecast(AlreadyUndone(rejecting=False), AlreadyUndone(rejecting=True))
        undone = StepAhead(action, Fate.MARKED) if session.sandbox else _ahead(action)
        return Forecast(ActionStays(action, words(action).undo.undoable), ActionUndone(undone))
    job = next((r for r in rollbacks if r.rollback_id == approval.rollback_id), None)
    rest = [a for a in rollback.chain(job, actions) if a.action_id != action.action_id] if job else []
    runs_now = evolve(_ahead(action), waits_for_approval=False)  # this is the approval it waits for
    return Forecast(
        RollbackGoesOn(runs_now, [_ahead(a) for a in rest]),
        RollbackStops(action, [StepAhead(a, Fate.NOT_REACHED) for a in rest]),
    )


def _call_refused(
    action: Action, session: Session, actions: Sequence[Action], rollbacks: Sequence[Rollback]
) -> CallRefused:
    if any(r.status in rules.ROLLBACK_UNDER_WAY for r in rollbacks):
        return CallRefused(AfterRefusal.ROLLBACK_UNDER_WAY)
    others = [a for a in actions if a.action_id != action.action_id]
    if not any(a.status in rules.UNDOABLE for a in others) and not session.sandbox:
        return CallRefused(AfterRefusal.NOTHING_DONE)
    if session.sandbox:
        flipped = [a for a in others if a.status in (ActionStatus.SUCCESS, ActionStatus.PENDING_APPROVAL)]
        steps = [StepAhead(a, Fate.MARKED) for a in sorted(flipped, key=lambda a: a.seq, reverse=True)]
    else:
        steps = [_ahead(a) for a in rollback.planned(others)]
    return CallRefused(AfterRefusal.ROLLED_BACK, steps) if steps else CallRefused(AfterRefusal.NOTHING_LEFT)


def _ahead(action: Action) -> StepAhead:
    if action.undo is None or action.undo.is_none:
        return StepAhead(action, Fate.STAYS)
    return StepAhead(action, Fate.UNDONE, waits_for_approval=action.undo.require_approval)


# what a decision did -----------------------------------------------------------------------------------
@frozen
class RollbackProgress:
    """The rollback a refusal started (``None``: nothing was rolled back), with how many of the actions it has
    dealt with (``dealt``) it undid (``undone``)."""

    job: Rollback | None
    undone: int = 0
    dealt: int = 0


@frozen
class CallNotRun:
    """A held call refused (``decided``: rejected or expired): it did not run, and the session's rollback."""

    decided: ApprovalStatus
    rollback: RollbackProgress


@frozen
class CallAllowed:
    """A held call approved, and what became of it (``action``): while it is not confirmed as run, when its
    agent had stopped waiting (``None``: it waited); once undone, the rollback that undid it."""

    decided: ApprovalStatus
    action: Action
    stopped_waiting_at: datetime | None = None
    undone_by: Rollback | None = None


@frozen
class UndoneLater:
    """A review whose action a rollback undid later (``undone_by``; ``None`` when not found)."""

    decided: ApprovalStatus
    undone_by: Rollback | None


@frozen
class UndoAsked:
    """A decision that asked for ``action``'s undo (a rejected review, an approved undo): where it stands."""

    decided: ApprovalStatus
    action: Action


@frozen
class ActionKept:
    """A review approved (or left to expire): the action stays done."""

    decided: ApprovalStatus


@frozen
class RollbackStopped:
    """An undo declined: the rollback stopped there; the session is ``FAILED`` and the action stays done."""

    decided: ApprovalStatus


Decided = CallNotRun | CallAllowed | UndoneLater | UndoAsked | ActionKept | RollbackStopped


def outcome(
    approval: Approval, action: Action, actions: Sequence[Action], rollbacks: Sequence[Rollback]
) -> Decided | None:
    """What a decided ``approval`` did, as things stand now (``None`` while it is pending): the card's
    confirmation, kept current as the agent resumes or a rollback undoes the action later."""
    decided = approval.status
    if decided is ApprovalStatus.PENDING:
        return None
    approved = decided is ApprovalStatus.APPROVED
    if approval.purpose is ApprovalPurpose.BEFORE_EXECUTION:
        if not approved:
            return CallNotRun(decided, _rollback_after(approval, actions, rollbacks))
        # Whether the agent resumed is known only from its call's outcome; before that, whether it waited.
        gone = (
            rules.stopped_waiting(approval, approval.resolved_at or approval.requested_at)
            if action.status is ActionStatus.CLEARED
            else None
        )
        undone_by = _undoing_rollback(action, rollbacks) if action.status is ActionStatus.ROLLED_BACK else None
        return CallAllowed(decided, action, gone, undone_by)
    if approval.purpose is ApprovalPurpose.AFTER_EXECUTION:
        if action.status is ActionStatus.ROLLED_BACK and not action.undo_requested:
            return UndoneLater(decided, _undoing_rollback(action, rollbacks))
        if decided is ApprovalStatus.REJECTED:
            return UndoAsked(decided, action)
        return ActionKept(decided)
    return UndoAsked(decided, action) if approved else RollbackStopped(decided)


def _rollback_after(approval: Approval, actions: Sequence[Action], rollbacks: Sequence[Rollback]) -> RollbackProgress:
    """What became of the session once a before-execution request was refused."""
    at = approval.resolved_at
    job = next(
        (r for r in reversed(rollbacks) if at is not None and r.created_at <= at and (r.finished_at or at) >= at),
        None,
    )
    if job is None:
        return RollbackProgress(None)
    dealt = rollback.walked(job, actions)
    return RollbackProgress(job, sum(a.status is ActionStatus.ROLLED_BACK for a in dealt), len(dealt))


def _undoing_rollback(action: Action, rollbacks: Iterable[Rollback]) -> Rollback | None:
    """The rollback that undid ``action``: the latest one started before it was marked undone."""
    return next((r for r in reversed(list(rollbacks)) if r.created_at <= action.updated_at), None)

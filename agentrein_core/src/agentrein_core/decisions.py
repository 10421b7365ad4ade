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
from agentrein_core.rollback import PLANNED, PLANNED_ASKED, WALKED, WALKED_ASKED, Pick
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


#: The steps of a rollback a reviewer's card lists, last done first; the others are counted.
SHOWN_STEPS = 20


@frozen
class StepsAhead:
    """The steps of the rollback a decision sets off, last done first: the first :data:`SHOWN_STEPS` of them
    (``shown``), how many there are in all (``count``), and how many of them leave their action as it is
    (``staying``: it has no inverse, or the rollback stops before it)."""

    shown: list[StepAhead] = field(factory=list)
    count: int = 0
    staying: int = 0


# a session's actions, as a decision reads them ---------------------------------------------------------
@frozen
class Tally:
    """The actions of a session that one :class:`~agentrein_core.rollback.Pick` picks, as a card needs them,
    however many there are: the latest, last done first (one more than a card lists: the card's own action may
    be among them), how many there are, how many of them have no inverse, how many are undone already, and how
    many a rollback is through with.
    The store counts them in SQL (``Actions.tallies``); :func:`tallied` counts a list of them."""

    latest: list[Action] = field(factory=list)
    count: int = 0
    without_inverse: int = 0
    undone: int = 0
    #: How many a rollback is through with (:func:`~agentrein_core.rollback.is_through`).
    through: int = 0

    def less(self, action: Action, pick: Pick) -> Tally:
        """This tally without ``action`` (a card's own, which its decision does not count among the others)."""
        if not pick.picks(action):
            return self
        return Tally(
            [a for a in self.latest if a.action_id != action.action_id],
            self.count - 1,
            self.without_inverse - has_no_inverse(action),
            self.undone - (action.status is ActionStatus.ROLLED_BACK),
            self.through - rollback.is_through(action),
        )


#: A session's actions, tallied by pick: the store's tallies, or :func:`tallied` of a list of them.
Tallies = Callable[[Pick], Tally]

#: Whatever a session has done and not undone (a refused call's session has something to roll back).
DONE = Pick(rules.UNDOABLE)
#: What a rollback of a sandbox session marks undone.
MARKABLE = Pick(frozenset({ActionStatus.SUCCESS, ActionStatus.PENDING_APPROVAL}))


#: The picks whose tallies a decision only counts: it lists none of their actions.
COUNTED_ONLY = frozenset({DONE, WALKED, WALKED_ASKED})


def has_no_inverse(action: Action) -> bool:
    return action.undo is None or action.undo.is_none


def tallied(actions: Sequence[Action]) -> Tallies:
    """The tallies of a session's every action (``actions``), counted in Python as the store counts in SQL."""

    def tally(pick: Pick) -> Tally:
        picked = rollback.last_done_first(actions, pick)
        return Tally(
            picked[: SHOWN_STEPS + 1],
            len(picked),
            sum(has_no_inverse(a) for a in picked),
            sum(a.status is ActionStatus.ROLLED_BACK for a in picked),
            sum(rollback.is_through(a) for a in picked),
        )

    return tally


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
    steps: StepsAhead = field(factory=StepsAhead)

    @property
    def irreversible(self) -> bool:
        return self.steps.staying > 0


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
    rest: StepsAhead

    @property
    def irreversible(self) -> bool:
        return False


@frozen
class RollbackStops:
    """Rejecting an undo: the rollback stops, the session is marked ``FAILED``, and ``action`` stays done, as do
    the ``rest`` it had left to undo."""

    action: Action
    rest: StepsAhead

    @property
    def irreversible(self) -> bool:
        return False


Foreseen = CallRuns | CallRefused | AlreadyUndone | ActionStays | ActionUndone | RollbackGoesOn | RollbackStops


@frozen
class Forecast:
    """What approving and what rejecting a pending request would each do."""

    approve: Foreseen
    reject: Foreseen


def picks_read(approval: Approval, session: Session, rollbacks: Sequence[Rollback]) -> frozenset[Pick]:
    """The tallies of its session's actions that :func:`foresee` and :func:`outcome` read for ``approval``:
    a held call's (pending: what a refusal rolls back; refused: how far that rollback went), and a pending
    undo's (the rest of its rollback). The others read only their own action and the session's rollbacks, so a
    page of approvals reads those sessions' actions only as far as these say."""
    pending = approval.status is ApprovalStatus.PENDING
    if approval.purpose is ApprovalPurpose.BEFORE_EXECUTION:
        if approval.status is ApprovalStatus.APPROVED:
            return frozenset()
        if pending:
            return frozenset({DONE, MARKABLE if session.sandbox else PLANNED})
        job = _refusal_rollback(approval, rollbacks)
        return frozenset() if job is None else frozenset({WALKED if job.whole_session else WALKED_ASKED})
    if approval.purpose is ApprovalPurpose.ROLLBACK and pending:
        job = _job_of(approval, rollbacks)
        return frozenset() if job is None else frozenset({PLANNED if job.whole_session else PLANNED_ASKED})
    return frozenset()


def foresee(
    approval: Approval,
    action: Action,
    session: Session,
    actions: Tallies,
    rollbacks: Sequence[Rollback],
    words: Describe,
) -> Forecast:
    """What approving and rejecting ``approval`` (of ``action``, in ``session`` with its ``actions``, tallied,
    and ``rollbacks``) would each do now; ``words`` tell whether a call not run yet could be undone."""
    if approval.purpose is ApprovalPurpose.BEFORE_EXECUTION:
        runs = CallRuns(action, words(action).undo.undoable, session.sandbox)
        return Forecast(runs, _call_refused(action, session, actions, rollbacks))
    if approval.purpose is ApprovalPurpose.AFTER_EXECUTION:
        if action.status not in rules.UNDOABLE:
            return Forecast(AlreadyUndone(rejecting=False), AlreadyUndone(rejecting=True))
        undone = StepAhead(action, Fate.MARKED) if session.sandbox else _ahead(action)
        return Forecast(ActionStays(action, words(action).undo.undoable), ActionUndone(undone))
    job = _job_of(approval, rollbacks)
    rest = Tally()
    if job is not None:
        pick = PLANNED if job.whole_session else PLANNED_ASKED
        rest = actions(pick).less(action, pick)
    runs_now = evolve(_ahead(action), waits_for_approval=False)  # this is the approval it waits for
    goes_on = StepsAhead([_ahead(a) for a in _shown(rest)], rest.count, rest.without_inverse)
    not_reached = StepsAhead([StepAhead(a, Fate.NOT_REACHED) for a in _shown(rest)], rest.count, rest.count)
    return Forecast(RollbackGoesOn(runs_now, goes_on), RollbackStops(action, not_reached))


def _job_of(approval: Approval, rollbacks: Sequence[Rollback]) -> Rollback | None:
    return next((r for r in rollbacks if r.rollback_id == approval.rollback_id), None)


def _shown(tally: Tally) -> list[Action]:
    return tally.latest[:SHOWN_STEPS]


def _call_refused(action: Action, session: Session, actions: Tallies, rollbacks: Sequence[Rollback]) -> CallRefused:
    if any(r.status in rules.ROLLBACK_UNDER_WAY for r in rollbacks):
        return CallRefused(AfterRefusal.ROLLBACK_UNDER_WAY)
    if not actions(DONE).less(action, DONE).count and not session.sandbox:
        return CallRefused(AfterRefusal.NOTHING_DONE)
    if session.sandbox:
        marked = actions(MARKABLE).less(action, MARKABLE)
        steps = StepsAhead([StepAhead(a, Fate.MARKED) for a in _shown(marked)], marked.count)
    else:
        undone = actions(PLANNED).less(action, PLANNED)
        steps = StepsAhead([_ahead(a) for a in _shown(undone)], undone.count, undone.without_inverse)
    return CallRefused(AfterRefusal.ROLLED_BACK, steps) if steps.count else CallRefused(AfterRefusal.NOTHING_LEFT)


def _ahead(action: Action) -> StepAhead:
    if action.undo is None or has_no_inverse(action):
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


def outcome(approval: Approval, action: Action, actions: Tallies, rollbacks: Sequence[Rollback]) -> Decided | None:
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


def _rollback_after(approval: Approval, actions: Tallies, rollbacks: Sequence[Rollback]) -> RollbackProgress:
    """What became of the session once a before-execution request was refused."""
    job = _refusal_rollback(approval, rollbacks)
    if job is None:
        return RollbackProgress(None)
    dealt = actions(WALKED if job.whole_session else WALKED_ASKED)
    return RollbackProgress(job, dealt.undone, dealt.count)


def _refusal_rollback(approval: Approval, rollbacks: Sequence[Rollback]) -> Rollback | None:
    """The rollback that ran when a before-execution request was refused (``None``: none did)."""
    at = approval.resolved_at
    return next(
        (r for r in reversed(rollbacks) if at is not None and r.created_at <= at and (r.finished_at or at) >= at),
        None,
    )


def _undoing_rollback(action: Action, rollbacks: Iterable[Rollback]) -> Rollback | None:
    """The rollback that undid ``action``: the latest one started before it was marked undone."""
    return next((r for r in reversed(list(rollbacks)) if r.created_at <= action.updated_at), None)

"""What a reviewer's decision does, as pure answers over records (the shape of :mod:`agentrein_core.rollback`):
before it is made, what approving and what rejecting a request would each do (:func:`foresee`); once it is
made, what it did (:func:`outcome`). Both follow the rules the engine applies (``engine.consequences.
apply_decision`` and the rollback chain of :mod:`agentrein_core.rollback`), so what a card promises is what
happens; the words for each action come from its connector (:class:`ActionWords`)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime

from attrs import evolve, field, frozen

from agentrein_core import rollback, rules
from agentrein_core.connector import Connector, Undoable, UndoOutlook, plain_description, plain_undo
from agentrein_core.model import Action, Approval, Rollback, Session
from agentrein_core.statuses import (
    ActionStatus,
    ApprovalPurpose,
    ApprovalStatus,
    RollbackStatus,
    UndoStatus,
)

log = logging.getLogger("agentrein")


@frozen
class ActionWords:
    """An action as a reviewer reads it, in its connector's words: what it does, the host it goes to (when its
    record says), and how it is undone (its recorded undo; before it ran, what the connector's rules say)."""

    description: str
    host: str | None
    undo: UndoOutlook


#: The words of each action, as the engine reads them through the installed connectors.
Describe = Callable[[Action], ActionWords]


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
    first). ``irreversible``: what stays after this decision cannot be taken back (warn the reviewer)."""

    summary: str
    steps: list[UndoStep] = field(factory=list)
    irreversible: bool = False


@frozen
class Consequences:
    """What approving and what rejecting a pending request would each do."""

    approve: Effect
    reject: Effect


def words_of(connector: Connector | None, action: Action) -> ActionWords:
    """``action`` in its connector's words (``None``: a connector not installed where it is read, in the
    words its record gives). A connector whose words fail is read the same way: a plugin's bug must not
    take the approval queue down."""
    if connector is not None:
        try:
            if action.undo is None:
                undo = connector.foresee_undo(action)
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


# before the decision ------------------------------------------------------------------------------------
def foresee(
    approval: Approval,
    action: Action,
    session: Session,
    actions: Sequence[Action],
    rollbacks: Sequence[Rollback],
    words: Describe,
) -> Consequences:
    """What approving and rejecting ``approval`` (of ``action``, in ``session`` with its ``actions`` and
    ``rollbacks``) would each do now."""
    if approval.purpose is ApprovalPurpose.BEFORE_EXECUTION:
        return Consequences(
            _call_runs(action, session, words), _call_refused(action, session, actions, rollbacks, words)
        )
    if approval.purpose is ApprovalPurpose.AFTER_EXECUTION:
        return Consequences(_action_stays(action, words), _action_undone(action, session, words))
    job = next((r for r in rollbacks if r.rollback_id == approval.rollback_id), None)
    rest = [a for a in rollback.chain(job, actions) if a.action_id != action.action_id] if job else []
    return Consequences(_rollback_goes_on(action, rest, words), _rollback_stops(action, rest, words))


def _call_runs(action: Action, session: Session, words: Describe) -> Effect:
    outlook = words(action).undo
    if outlook.undoable is Undoable.YES:
        summary, irreversible = f"The agent's call runs. It can be undone later: {outlook.how}.", False
    elif outlook.undoable is Undoable.NO:
        summary, irreversible = f"The agent's call runs, and it cannot be undone: {outlook.how}.", True
    else:
        summary = f"The agent's call runs. Whether it can be undone is known only once it has run: {outlook.how}."
        irreversible = False
    if session.sandbox:
        summary += " This is a sandbox session: rolling it back only marks its calls undone, running no inverse."
    return Effect(summary, irreversible=irreversible)


def _call_refused(
    action: Action, session: Session, actions: Sequence[Action], rollbacks: Sequence[Rollback], words: Describe
) -> Effect:
    refused = "The agent's call does not run (the agent is told it was rejected)"
    if any(r.status in rules.ROLLBACK_UNDER_WAY for r in rollbacks):
        return Effect(f"{refused}; a rollback of the session is already under way.")
    others = [a for a in actions if a.action_id != action.action_id]
    if not any(a.status in rules.UNDOABLE for a in others) and not session.sandbox:
        return Effect(f"{refused}. Nothing was done before it, so nothing is undone; the session is marked FAILED.")
    if session.sandbox:
        flipped = [a for a in others if a.status in (ActionStatus.SUCCESS, ActionStatus.PENDING_APPROVAL)]
        steps = [_sandbox_step(a, words) for a in sorted(flipped, key=lambda a: a.seq, reverse=True)]
    else:
        steps = [_step(a, words) for a in rollback.planned(others)]
    if not steps:
        return Effect(f"{refused}. Nothing done before it is left to undo.")
    undone = sum(step.undo is not None for step in steps)
    stays = len(steps) - undone
    kept = f"; {_actions(stays)} with no inverse {_verb(stays, 'stays as it is', 'stay as they are')}" if stays else ""
    summary = (
        f"{refused}, and the session is rolled back: {_actions(undone)} {_verb(undone, 'is', 'are')} undone, "
        f"last done first{kept}:"
    )
    return Effect(summary, steps, irreversible=bool(stays))


def _action_stays(action: Action, words: Describe) -> Effect:
    if action.status not in rules.UNDOABLE:
        return Effect("Nothing changes: the action was already undone.")
    outlook = words(action).undo
    if outlook.undoable is Undoable.NO:
        return Effect(f"The action stays done, and nothing can undo it: {outlook.how}.", irreversible=True)
    return Effect(f"The action stays done; a rollback of the session would still undo it: {outlook.how}.")


def _action_undone(action: Action, session: Session, words: Describe) -> Effect:
    if action.status not in rules.UNDOABLE:
        return Effect("Nothing more happens: the action was already undone.")
    if session.sandbox:
        return Effect(
            "This one action is marked undone; no inverse runs (a sandbox session).", [_sandbox_step(action, words)]
        )
    step = _step(action, words)
    if step.undo is None:
        summary = f"This one action cannot be undone ({step.stays}): it stays as it is; your rejection is recorded."
        return Effect(summary, [step], irreversible=True)
    waits = " Its undo first waits for a reviewer's approval." if step.waits_for_approval else ""
    return Effect(f"This one action is undone: {step.undo}.{waits}", [step])


def _rollback_goes_on(action: Action, rest: list[Action], words: Describe) -> Effect:
    step = evolve(_step(action, words), waits_for_approval=False)  # this is the approval it waits for
    then = (
        f"; then {_actions(len(rest))} {_verb(len(rest), 'is', 'are')} still to undo, last done first" if rest else ""
    )
    summary = f"The undo runs ({step.undo or step.stays}) and the rollback goes on{then}."
    return Effect(summary, [step, *(_step(a, words) for a in rest)])


def _rollback_stops(action: Action, rest: list[Action], words: Describe) -> Effect:
    also = f"; the {_actions(len(rest))} left to undo {_verb(len(rest), 'stays', 'stay')} as well" if rest else ""
    summary = (
        f"The rollback stops here: the session is marked FAILED and this action stays done "
        f"({words(action).description}){also}."
    )
    steps = [UndoStep(a.action_id, a.seq, words(a).description, None, "the rollback stops before it") for a in rest]
    return Effect(summary, steps)


def _step(action: Action, words: Describe) -> UndoStep:
    said = words(action)
    if action.undo is None or action.undo.is_none:
        return UndoStep(action.action_id, action.seq, said.description, None, said.undo.how)
    return UndoStep(
        action.action_id, action.seq, said.description, said.undo.how, waits_for_approval=action.undo.require_approval
    )


def _sandbox_step(action: Action, words: Describe) -> UndoStep:
    return UndoStep(action.action_id, action.seq, words(action).description, "marked undone; no inverse runs (sandbox)")


def _actions(n: int) -> str:
    return "1 action" if n == 1 else f"{n} actions"


def _verb(n: int, one: str, many: str) -> str:
    return one if n == 1 else many


# after the decision -------------------------------------------------------------------------------------
def outcome(
    approval: Approval,
    action: Action,
    actions: Sequence[Action],
    rollbacks: Sequence[Rollback],
    words: Describe,
) -> str | None:
    """What a decided ``approval`` did, as things stand now (``None`` while it is pending): the card's
    confirmation, kept current as the agent resumes or a rollback undoes the action later."""
    if approval.status is ApprovalStatus.PENDING:
        return None
    decided = {
        ApprovalStatus.APPROVED: "Approved",
        ApprovalStatus.REJECTED: "Rejected",
        ApprovalStatus.EXPIRED: "Expired (nobody decided in time)",
    }[approval.status]
    approved = approval.status is ApprovalStatus.APPROVED
    if approval.purpose is ApprovalPurpose.BEFORE_EXECUTION:
        if not approved:
            return f"{decided}: the agent's call did not run; {_rollback_after(approval, actions, rollbacks)}."
        return f"{decided}: {_call_after(approval, action, rollbacks)}."
    if approval.purpose is ApprovalPurpose.AFTER_EXECUTION:
        if action.status is ActionStatus.ROLLED_BACK and not action.undo_requested:
            return f"{decided}, then undone by {_undoing_rollback(action, rollbacks)}."
        if approval.status is ApprovalStatus.REJECTED:
            return f"{decided}: {_undo_after(action, words)}."
        return f"{decided}: the action stays done."
    if approved:
        return f"{decided}: {_undo_after(action, words)}."
    return f"{decided}: the rollback stopped here; the session is FAILED and this action stays done."


def _call_after(approval: Approval, action: Action, rollbacks: Sequence[Rollback]) -> str:
    if action.status is ActionStatus.CLEARED:
        # Whether the agent resumed is known only from its call's outcome; before that, whether it waited.
        gone = rules.stopped_waiting(approval, approval.resolved_at or approval.requested_at)
        if gone is not None:
            return f"the agent had stopped waiting ({_minute(gone)}), so its call has not run"
        return "the agent was told; its call is not confirmed as run yet"
    if action.status is ActionStatus.FAILED:
        return f"the agent's call ran and failed ({action.error or 'no error recorded'})"
    if action.status is ActionStatus.ROLLED_BACK:
        return f"the agent's call ran, and was undone by {_undoing_rollback(action, rollbacks)}"
    if action.status is ActionStatus.ROLLBACK_FAILED:
        return f"the agent's call ran; a rollback could not undo it ({action.error or 'no error recorded'})"
    return "the agent's call ran"


def _rollback_after(approval: Approval, actions: Sequence[Action], rollbacks: Sequence[Rollback]) -> str:
    """What became of the session once a before-execution request was refused."""
    at = approval.resolved_at
    job = next(
        (r for r in reversed(rollbacks) if at is not None and r.created_at <= at and (r.finished_at or at) >= at),
        None,
    )
    if job is None:
        return "nothing was rolled back"
    dealt = rollback.walked(job, actions)
    undone = sum(a.status is ActionStatus.ROLLED_BACK for a in dealt)
    if job.status is RollbackStatus.SUCCEEDED:
        stays = len(dealt) - undone
        kept = f", {stays} with no inverse left as {'it was' if stays == 1 else 'they were'}" if stays else ""
        return f"the session was rolled back ({undone} undone{kept})"
    if job.status is RollbackStatus.FAILED:
        return f"the session's rollback stopped ({undone} undone): {job.error or 'an undo failed'}"
    waiting = "; an undo waits for a reviewer's approval" if job.status is RollbackStatus.WAITING_APPROVAL else ""
    return f"the session is being rolled back ({undone} of {len(dealt)} undone so far{waiting})"


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


def _undoing_rollback(action: Action, rollbacks: Iterable[Rollback]) -> str:
    """The rollback that undid ``action``: the latest one started before it was marked undone."""
    job = next((r for r in reversed(list(rollbacks)) if r.created_at <= action.updated_at), None)
    if job is None:
        return "a rollback"
    return f"the rollback of {_minute(job.created_at)} ({job.trigger}, requested by {job.requested_by})"


def _minute(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M UTC")

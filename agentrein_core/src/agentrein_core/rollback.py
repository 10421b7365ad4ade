"""The rollback chain, as pure decisions: given a job and its session's records, what is the next step?

The engine applies each step in its own transaction and runs inverses through an :class:`UndoExecutor`, the
one small interface behind which "how to reach the service" lives: in embedded mode the SDK's executor uses
the very client the agent wrapped; in the server, one built from the organisation's stored credentials. An undo
the server cannot run (its connector has no server side) is handed to the agent process that holds the client
(:func:`handed_step`).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Protocol

from attrs import frozen

from agentrein_core.model import Action, Approval, Rollback, UndoHandoff
from agentrein_core.rules import UNDOABLE
from agentrein_core.statuses import ActionStatus, ApprovalPurpose, ApprovalStatus, HandoffOutcome, UndoStatus


class UndoExecutor(Protocol):
    """Runs inverses. ``run_undo`` must put ``action.undo_idempotency_key`` on the inverse call, so that a
    resumed rollback that repeats an inverse whose outcome was lost never applies it twice."""

    def can_run(self, action: Action) -> bool:
        """Whether this executor can reach the service of ``action`` at all (no side effect)."""
        ...

    def run_undo(self, action: Action) -> None:
        """Undo ``action``; return once its effect is gone (or was already gone), raise otherwise."""
        ...

    @property
    def hands_over(self) -> bool:
        """Whether an undo this executor cannot run is handed to the agent process that holds the action's
        client (the server's executor: no other server process could run it either), rather than left for
        another process of the agent's own (embedded mode)."""
        ...


@frozen
class Finish:
    """Nothing is left to undo."""


@frozen
class Skip:
    """The action's undo type is ``none``: mark it ``SKIPPED`` and go on."""

    action: Action


@frozen
class AskApproval:
    """The undo needs a human's ``ROLLBACK`` approval first: open it and pause the job."""

    action: Action


@frozen
class WaitForApproval:
    """A ``ROLLBACK`` approval for the action is still pending."""

    action: Action
    approval: Approval


@frozen
class Declined:
    """The reviewer declined the undo (or let it expire): the chain stops here."""

    action: Action


@frozen
class WaitForConfirmation:
    """A call recorded after the chain's head was cleared to run, and its outcome is not in yet: undo nothing
    before it, so that the chain stays last-first whatever that call did; look again shortly."""

    action: Action


@frozen
class RunUndo:
    action: Action


Step = Finish | Skip | AskApproval | WaitForApproval | WaitForConfirmation | Declined | RunUndo


@frozen
class Offer:
    """Hand the undo to the agent processes: none has been offered for this job yet."""

    action: Action


@frozen
class AwaitAgent:
    """The handed undo is offered, or taken by a process, until ``until``: look again then, or when its outcome
    is reported."""

    action: Action
    until: datetime


@frozen
class AgentUndid:
    """The agent process that took the undo reports it done."""

    action: Action


@frozen
class AgentFailed:
    """The handed undo failed, or no process took it or reported in time: the chain stops here."""

    action: Action
    reason: str


Handed = Offer | AwaitAgent | AgentUndid | AgentFailed


def handed_step(action: Action, handoff: UndoHandoff | None, now: datetime) -> Handed:
    """Where an undo that the server hands to the agent's process stands (``handoff``: this job's offer of
    it, if any)."""
    if handoff is None:
        return Offer(action)
    if handoff.outcome is HandoffOutcome.DONE:
        return AgentUndid(action)
    if handoff.outcome is HandoffOutcome.FAILED:
        return AgentFailed(action, f"the agent's process could not undo it: {handoff.error or 'no reason given'}")
    expired = handoff.outcome is HandoffOutcome.EXPIRED
    if handoff.lease_id is None:
        if not expired and now < handoff.claim_by:
            return AwaitAgent(action, handoff.claim_by)
        waited = round((handoff.claim_by - handoff.offered_at).total_seconds())
        return AgentFailed(
            action,
            f"no agent process took its undo within {waited} s: connector {action.connector!r} runs undos through "
            "the client the agent wrapped, and no process holding one for this session asked for it (the agent "
            "has ended?); run the agent again and roll back again, or undo it by hand",
        )
    assert handoff.leased_until is not None  # taken: leased until then
    if not expired and now < handoff.leased_until:
        return AwaitAgent(action, handoff.leased_until)
    return AgentFailed(
        action,
        "the agent process that took its undo did not report the outcome before its lease ended: it may have run; "
        "check before you roll back again (a new rollback hands it to the agent's process again)",
    )


@frozen
class Pick:
    """Which of a session's actions a rollback deals with, as data: :meth:`picks` says it in Python, and the
    store compiles it to SQL to count them there (``Actions.tallies``). One source, two interpreters."""

    statuses: frozenset[ActionStatus]
    #: Only those a reviewer asked to undo (a rollback that is not ``whole_session``).
    asked_only: bool = False
    #: Not those whose undo was skipped already.
    unskipped_only: bool = False

    def picks(self, action: Action) -> bool:
        return (
            action.status in self.statuses
            and (not self.asked_only or action.undo_requested)
            and (not self.unskipped_only or action.undo_status is not UndoStatus.SKIPPED)
        )


#: What a rollback of the whole session would still undo: executed, neither undone nor skipped yet.
PLANNED = Pick(UNDOABLE, unskipped_only=True)
#: What a rollback of the actions a reviewer asked to undo would still undo.
PLANNED_ASKED = Pick(UNDOABLE, asked_only=True, unskipped_only=True)
#: What a rollback of the whole session deals with, done or still to do.
WALKED = Pick(UNDOABLE | {ActionStatus.ROLLED_BACK})
#: What a rollback of the actions a reviewer asked to undo deals with, done or still to do.
WALKED_ASKED = Pick(UNDOABLE | {ActionStatus.ROLLED_BACK}, asked_only=True)


def chain(job: Rollback, actions: Iterable[Action]) -> list[Action]:
    """The actions the job still has to deal with, last executed first (LIFO): executed (or whose undo
    failed before) and neither undone nor skipped yet; for a job that is not ``whole_session``, only the
    ones a reviewer asked to undo. A call confirmed while the rollback runs joins the chain at its place."""
    return planned(actions, only_requested=not job.whole_session)


def planned(actions: Iterable[Action], *, only_requested: bool = False) -> list[Action]:
    """What a rollback would undo now, in the order it would: executed actions not yet undone or skipped,
    last executed first (shown to an operator before they confirm a rollback)."""
    return last_done_first(actions, PLANNED_ASKED if only_requested else PLANNED)


def walked(job: Rollback, actions: Iterable[Action]) -> list[Action]:
    """Every action the job deals with, whether done or still to do, last executed first: what a progress
    view walks down."""
    return last_done_first(actions, WALKED if job.whole_session else WALKED_ASKED)


def last_done_first(actions: Iterable[Action], pick: Pick) -> list[Action]:
    """The actions ``pick`` picks, last executed first."""
    return sorted((a for a in actions if pick.picks(a)), key=lambda a: a.seq, reverse=True)


def is_through(action: Action) -> bool:
    """Whether a rollback is through with ``action``: undone (a sandbox's too), or its undo skipped, failed or
    declined."""
    return action.status is ActionStatus.ROLLED_BACK or action.undo_status in THROUGH


#: The undo statuses of an action a rollback is through with, though not undone (:func:`is_through`).
THROUGH = frozenset({UndoStatus.SKIPPED, UndoStatus.FAILED, UndoStatus.DECLINED})


def next_step(
    job: Rollback, actions: Iterable[Action], approvals: Iterable[Approval], awaited: Iterable[Action] = ()
) -> Step:
    """``awaited``: the session's calls cleared to run whose outcome may still come
    (:data:`~agentrein_core.rules.CONFIRMATION_AWAITED`); a whole-session rollback waits for those recorded
    after its head, since a success among them is undone first. A one-action undo waits for nothing."""
    remaining = chain(job, actions)
    if job.whole_session:
        later = [a for a in awaited if not remaining or a.seq > remaining[0].seq]
        if later:
            return WaitForConfirmation(max(later, key=lambda a: a.seq))
    if not remaining:
        return Finish()
    action = remaining[0]
    if action.undo is None or action.undo.is_none:
        return Skip(action)
    if action.undo.require_approval:
        asked = [
            p
            for p in approvals
            if p.action_id == action.action_id
            and p.purpose is ApprovalPurpose.ROLLBACK
            and p.rollback_id == job.rollback_id
        ]
        if not asked:
            return AskApproval(action)
        latest = asked[-1]
        if latest.status is ApprovalStatus.PENDING:
            return WaitForApproval(action, latest)
        if latest.status is not ApprovalStatus.APPROVED:
            return Declined(action)
    return RunUndo(action)

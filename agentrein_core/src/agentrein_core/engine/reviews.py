"""Use cases of human review: reading the approval queue, deciding an approval, and what each decision
means for its action (status reference §4), whichever way it was decided: by a reviewer, or by expiry.
Every approval is read with what a reviewer needs to decide it (:func:`explain`): the action in its connector's
words, and what approving or rejecting does (or, once decided, did)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

from attrs import evolve

import agentrein_core.engine.cursors as cursors
import agentrein_core.engine.validation as validation
from agentrein_core import decisions, rules, wording
from agentrein_core.converter import to_wire
from agentrein_core.engine.base import UseCases
from agentrein_core.engine.consequences import SYSTEM, already_decided, apply_decision, emit
from agentrein_core.engine.records import action_of, approval_of, read_approval, replace, session_of, set_action
from agentrein_core.errors import InvalidTransitionError
from agentrein_core.model import Action, Approval, Rollback, Session
from agentrein_core.plugins import installed_connectors
from agentrein_core.read_models import (
    ApprovalInfo,
    ApprovalPage,
    Explanation,
    SessionSummary,
    approval_info,
    queue_order,
)
from agentrein_core.rollback import Pick
from agentrein_core.statuses import ActionStatus, ApprovalPurpose, ApprovalStatus, DisplayStatus, EventType
from agentrein_core.store import Change, Tx
from agentrein_core.store.approvals import approval_position


class Reviews(UseCases):
    def get_approval(self, org_id: str, approval_id: str, *, agent_key: str | None = None) -> ApprovalInfo:
        """The approval, explained; ``agent_key``: the caller is that agent key, which sees (and withdraws) only
        the approvals of sessions it opened."""
        with self.store.snapshot() as tx:
            (shown,) = self._explained(tx, [approval_of(tx, org_id, approval_id, agent_key=agent_key)])
            return shown

    def sessions_under_review(self, org_id: str, sessions: Iterable[SessionSummary]) -> set[str]:
        """Of ``sessions`` (a page of the organisation's), the ids of those awaiting approval whose pending
        approvals are all reviews of calls that already ran: nothing waits for a decision in them."""
        awaiting = [s.id for s in sessions if s.display_status is DisplayStatus.AWAITING_APPROVAL]
        if not awaiting:
            return set()
        with self.store.transaction(write=False) as tx:
            return set(awaiting) - tx.approvals.sessions_held_for_decision(org_id, awaiting)

    def list_approvals(self, org_id: str, status: ApprovalStatus | None = None) -> list[ApprovalInfo]:
        """Approvals of the organisation, pending first and oldest first: all of them, explained."""
        return self.approval_page(org_id, status).approvals

    def approval_page(
        self,
        org_id: str,
        status: ApprovalStatus | None = None,
        *,
        limit: int | None = None,
        cursor: str | None = None,
        explained: bool = True,
        agent_key: str | None = None,
    ) -> ApprovalPage:
        """One page of the organisation's approvals, pending first and oldest first (at most ``limit``, 1 to
        1000; all without it); pass its ``next_cursor`` back as ``cursor`` for the next. Without
        ``explained`` the fields of :data:`~agentrein_core.read_models.EXPLAINED_FIELDS` are left out, and the
        approvals' sessions are not read. ``agent_key``: only those of sessions that agent key opened."""
        status = ApprovalStatus(status) if status is not None else None
        if limit is not None:
            validation.page_size("limit", limit)
        after = (
            cursors.decode(cursor, (cursors.one_of(0, 1), cursors.moment, cursors.identifier("apr")))
            if cursor
            else None
        )
        now = self.clock()
        with self.store.snapshot() as tx:
            found = tx.approvals.page(org_id, status, limit, after, opened_by=agent_key)
            if explained:
                shown = self._explain(tx, found, now)
            else:
                shown = [approval_info(approval, action, session, now) for approval, action, session in found]
        if limit is None or len(found) < limit:
            return ApprovalPage(shown, None)
        return ApprovalPage(shown, cursors.encode(approval_position(found[-1][0])))

    def approval_queue(
        self, org_id: str, decided: int = 20, shown: int = 100
    ) -> tuple[list[ApprovalInfo], list[ApprovalInfo], int]:
        """What a reviewer's queue shows: the ``shown`` pending approvals to decide first, those someone waits
        for (the agent, a rollback) first by time left, then after-execution reviews by time left; the
        ``decided`` latest decisions (newest first); and how many are pending in all. Read in a fixed number
        of queries however long the queue and the history."""
        now = self.clock()
        with self.store.snapshot() as tx:
            pending, latest, waiting = tx.approvals.queue(org_id, decided, shown)
            return queue_order(self._explain(tx, pending, now)), self._explain(tx, latest, now), waiting

    def words(self, action: Action) -> decisions.ActionWords:
        """``action`` in its connector's words: the engine's connectors, else (an engine given none, as the
        command line's on a database) the installed ones; a connector not installed here, in its record's."""
        connectors = self.connectors if self.connectors is not None else installed_connectors()
        return wording.words_of(connectors.find(action.connector), action)

    def _explained(self, tx: Tx, approvals: Iterable[Approval]) -> list[ApprovalInfo]:
        found = [(p, action_of(tx, p.org_id, p.action_id), session_of(tx, p.org_id, p.session_id)) for p in approvals]
        return self._explain(tx, found, self.clock())

    def _explain(self, tx: Tx, found: list[tuple[Approval, Action, Session]], now: datetime) -> list[ApprovalInfo]:
        """Each approval as read with what its decision does: the rollbacks of all their sessions in one query,
        and the tallies of their actions that their decisions read (:func:`~agentrein_core.decisions.picks_read`)
        in one query per kind, counted in SQL, so that a page costs the same however long its sessions are."""
        rollbacks = tx.rollbacks.of_sessions(sorted({session.session_id for _, _, session in found}))
        wanted: dict[Pick, set[str]] = {}
        for approval, _, session in found:
            for pick in decisions.picks_read(approval, session, rollbacks.get(session.session_id, [])):
                wanted.setdefault(pick, set()).add(session.session_id)
        counted = {
            pick: tx.actions.tallies(sorted(ids), pick, latest=0 if pick in decisions.COUNTED_ONLY else None)
            for pick, ids in wanted.items()
        }

        def tallies_of(session_id: str) -> decisions.Tallies:
            return lambda pick: counted[pick].get(session_id, decisions.Tally())

        said: dict[str, decisions.ActionWords] = {}  # an action is on several cards of a page, and twice on each

        def words(action: Action) -> decisions.ActionWords:
            if action.action_id not in said:
                said[action.action_id] = self.words(action)
            return said[action.action_id]

        return [
            approval_info(
                approval,
                action,
                session,
                now,
                explain(approval, action, session, tallies_of(sid), rollbacks.get(sid, []), words),
            )
            for approval, action, session in found
            for sid in (session.session_id,)
        ]

    def count_pending_approvals(self) -> int:
        """Approvals waiting for a decision, in all organisations (for metrics)."""
        with self.store.transaction(write=False) as tx:
            return tx.approvals.count_pending()

    def count_unconfirmed(self) -> int:
        """Approved actions whose execution was never confirmed (``unconfirmed``), in all organisations."""
        with self.store.transaction(write=False) as tx:
            return tx.approvals.count_unconfirmed(self.clock() - rules.UNCONFIRMED_AFTER)

    def approve(self, org_id: str, approval_id: str, reviewer: str, reason: str | None = None) -> Approval:
        return self._decide(org_id, approval_id, ApprovalStatus.APPROVED, reviewer, reason)

    def reject(self, org_id: str, approval_id: str, reviewer: str, reason: str | None = None) -> Approval:
        return self._decide(org_id, approval_id, ApprovalStatus.REJECTED, reviewer, reason)

    def wait_for_decision(
        self, org_id: str, approval_id: str, timeout: float, *, agent_key: str | None = None
    ) -> ApprovalInfo:
        """The approval once it is decided, or as it stands after ``timeout`` seconds. A decision committed
        through this process's store, or announced to it by another process, wakes the wait at once; others
        are seen at the next look. A wait on a pending before-execution request is the agent's presence: it
        notes when it will end as it starts, and its end as it ends (:attr:`Approval.waited_until`)."""
        deadline = time.monotonic() + max(0.0, timeout)
        noted: datetime | None = None  # what this wait noted of its end, if it did
        while True:
            with self.store.transaction(write=False) as tx:  # only its status, while it waits
                approval = approval_of(tx, org_id, approval_id, agent_key=agent_key)
            remaining = deadline - time.monotonic()
            if approval.status is not ApprovalStatus.PENDING or remaining <= 0:
                if noted is not None:
                    self._note_waiter(approval_id, self.clock(), noted=noted)
                return self.get_approval(org_id, approval_id, agent_key=agent_key)
            if noted is None and approval.purpose is ApprovalPurpose.BEFORE_EXECUTION:
                noted = self.clock() + timedelta(seconds=remaining)
                self._note_waiter(approval_id, noted)
            self.waiters.wait(remaining)

    def _note_waiter(self, approval_id: str, until: datetime, *, noted: datetime | None = None) -> None:
        with self.store.transaction() as tx:
            tx.approvals.note_waiter(approval_id, until, noted=noted)

    def withdraw(self, org_id: str, approval_id: str, reason: str, *, agent_key: str | None = None) -> Approval:
        """The agent waiting for a before-execution approval has gone (interrupted, its task cancelled): its
        call will not run, so nobody is left to act on a decision. The request closes ``REJECTED``, its reason
        saying it was withdrawn and why; the action becomes ``FAILED``. Nothing is rolled back by it: nobody
        refused the call (the agent may go on; an operator may roll the session back). A request decided
        meanwhile stays as decided (:class:`InvalidTransitionError`)."""
        why = "withdrawn: " + validation.redacted_text("reason", reason, validation.MAX_TEXT, self.redactors.common)
        now = self.clock()
        with self.store.transaction() as tx:
            approval = approval_of(tx, org_id, approval_id, agent_key=agent_key)
            if approval.purpose is not ApprovalPurpose.BEFORE_EXECUTION:
                raise InvalidTransitionError(f"approval {approval_id} is not a request a call waits for")
            if approval.status is not ApprovalStatus.PENDING:
                raise already_decided(approval)
            closed = evolve(approval, status=ApprovalStatus.REJECTED, resolved_at=now, resolved_by=SYSTEM, reason=why)
            replace(tx, closed, status=ApprovalStatus.PENDING)
            tx.announce(Change.DECISION)
            set_action(tx, action_of(tx, org_id, approval.action_id), now, status=ActionStatus.FAILED, error=why)
            emit(tx, now, org_id, EventType.APPROVAL_DECIDED, to_wire(read_approval(tx, closed, now)))
            return closed

    def _decide(
        self, org_id: str, approval_id: str, status: ApprovalStatus, reviewer: str, reason: str | None
    ) -> Approval:
        # Free text of a person's choosing, redacted like an error text: a reason may quote the card or token.
        redactor = self.redactors.common
        reviewer = validation.redacted_text("reviewer", reviewer, 200, redactor)
        if reason is not None:
            reason = validation.redacted_text("reason", reason, validation.MAX_TEXT, redactor, allow_empty=True)
        with self.store.transaction() as tx:
            return apply_decision(tx, self.clock(), approval_of(tx, org_id, approval_id), status, reviewer, reason)


def explain(
    approval: Approval,
    action: Action,
    session: Session,
    actions: decisions.Tallies,
    rollbacks: Sequence[Rollback],
    words: decisions.Describe,
) -> Explanation:
    """What a reviewer reads beside ``approval`` (of ``action``, in ``session`` with its ``actions``, tallied,
    and ``rollbacks``): the action in its connector's ``words``, and what the decision would do (while pending) or
    did, as :mod:`~agentrein_core.decisions` answers it and :mod:`~agentrein_core.wording` says it."""
    said = words(action)
    pending = approval.status is ApprovalStatus.PENDING
    forecast = decisions.foresee(approval, action, session, actions, rollbacks, words) if pending else None
    return Explanation(
        description=said.description,
        target_host=said.host,
        consequences=wording.consequences(forecast, words) if forecast is not None else None,
        outcome=wording.outcome(decisions.outcome(approval, action, actions, rollbacks), words),
    )

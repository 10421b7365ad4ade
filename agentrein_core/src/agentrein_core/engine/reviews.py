"""Use cases of human review: reading the approval queue, deciding an approval, and what each decision
means for its action (status reference §4), whichever way it was decided: by a reviewer, or by expiry."""

from __future__ import annotations

import time
from datetime import datetime

from attrs import evolve

import agentrein_core.engine.validation as validation
from agentrein_core import rules
from agentrein_core.converter import to_wire
from agentrein_core.engine.base import UseCases
from agentrein_core.engine.consequences import after_failure, emit, rollback_ended, start_rollback
from agentrein_core.engine.records import (
    action_of,
    approval_of,
    read_approval,
    replace,
    session_of,
    set_action,
    set_session_status,
)
from agentrein_core.errors import InvalidTransitionError
from agentrein_core.model import Approval
from agentrein_core.statuses import (
    ActionStatus,
    ApprovalPurpose,
    ApprovalStatus,
    EventType,
    RollbackStatus,
    SessionStatus,
    UndoStatus,
)
from agentrein_core.store import Change, Tx
from agentrein_core.views import ApprovalInfo, approval_info


class Reviews(UseCases):
    def get_approval(self, org_id: str, approval_id: str) -> ApprovalInfo:
        with self.store.transaction(write=False) as tx:
            return read_approval(tx, approval_of(tx, org_id, approval_id), self.clock())

    def list_approvals(self, org_id: str, status: ApprovalStatus | None = None) -> list[ApprovalInfo]:
        """Approvals of the organisation, pending first and oldest first."""
        status = ApprovalStatus(status) if status is not None else None
        now = self.clock()
        with self.store.transaction(write=False) as tx:
            return [read_approval(tx, p, now) for p in tx.list_approvals(org_id, status)]

    def approval_queue(self, org_id: str, decided: int = 20) -> tuple[list[ApprovalInfo], list[ApprovalInfo]]:
        """What a reviewer's queue shows: every pending approval (oldest first) and the ``decided`` latest
        decisions (newest first), read in two queries however long the history."""
        now = self.clock()
        with self.store.transaction(write=False) as tx:
            pending, latest = tx.approval_queue(org_id, decided)
        return (
            [approval_info(*found, now) for found in pending],
            [approval_info(*found, now) for found in latest],
        )

    def count_pending_approvals(self) -> int:
        """Approvals waiting for a decision, in all organisations (for metrics)."""
        with self.store.transaction(write=False) as tx:
            return tx.count_pending_approvals()

    def count_unconfirmed(self) -> int:
        """Approved actions whose execution was never confirmed (``unconfirmed``), in all organisations."""
        with self.store.transaction(write=False) as tx:
            return tx.count_unconfirmed(self.clock() - rules.UNCONFIRMED_AFTER)

    def approve(self, org_id: str, approval_id: str, reviewer: str, reason: str | None = None) -> Approval:
        return self._decide(org_id, approval_id, ApprovalStatus.APPROVED, reviewer, reason)

    def reject(self, org_id: str, approval_id: str, reviewer: str, reason: str | None = None) -> Approval:
        return self._decide(org_id, approval_id, ApprovalStatus.REJECTED, reviewer, reason)

    def wait_for_decision(self, org_id: str, approval_id: str, timeout: float) -> ApprovalInfo:
        """The approval once it is decided, or as it stands after ``timeout`` seconds. A decision committed
        through this process's store, or announced to it by another process, wakes the wait at once; others
        are seen at the next look."""
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            view = self.get_approval(org_id, approval_id)
            remaining = deadline - time.monotonic()
            if view.status is not ApprovalStatus.PENDING or remaining <= 0:
                return view
            self.waiters.wait(remaining)

    def _decide(
        self, org_id: str, approval_id: str, status: ApprovalStatus, reviewer: str, reason: str | None
    ) -> Approval:
        reviewer = validation.text("reviewer", reviewer, 200)
        reason = (
            validation.text("reason", reason, validation.MAX_TEXT, allow_empty=True) if reason is not None else None
        )
        with self.store.transaction() as tx:
            return apply_decision(tx, self.clock(), approval_of(tx, org_id, approval_id), status, reviewer, reason)


def apply_decision(
    tx: Tx, now: datetime, approval: Approval, status: ApprovalStatus, reviewer: str, reason: str | None
) -> Approval:
    """Decide ``approval`` and carry out what the decision means for its action (status reference §4)."""
    if approval.status is not ApprovalStatus.PENDING:
        by = f" by {approval.resolved_by}" if approval.resolved_by else ""
        raise InvalidTransitionError(f"approval {approval.approval_id} was already {approval.status}{by}")
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
            set_action(tx, action, now, undo_requested=True)
            start_rollback(tx, now, session, reviewer, "after-execution approval rejected", whole_session=False)
    elif purpose is ApprovalPurpose.ROLLBACK:
        job = tx.rollback(approval.org_id, approval.rollback_id or "")
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

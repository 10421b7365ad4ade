"""The engine's housekeeping: approvals that time out are expired (with what an expiry means), sessions
idle for 24 hours are abandoned, and settled events, deliveries and intent checks older than the retention
are pruned (:mod:`agentrein_core.retention`). Run when due by the supervisor
(:mod:`agentrein_core.supervisor`), in the server's workers or embedded mode's thread; every part is safe to
run concurrently."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from attrs import evolve, frozen

from agentrein_core import retention, rules
from agentrein_core.database import lost_to_another_transaction
from agentrein_core.engine.base import UseCases
from agentrein_core.engine.consequences import SYSTEM, apply_decision
from agentrein_core.errors import AgentReinUnavailableError, InvalidTransitionError
from agentrein_core.statuses import ApprovalStatus, SessionStatus


@frozen
class MaintenanceReport:
    expired_approvals: int
    abandoned_sessions: int
    #: Events, deliveries and intent checks deleted for being settled and older than the retention.
    pruned: int = 0


class Maintenance(UseCases):
    def maintain(self) -> MaintenanceReport:
        """Expire approvals past ``timeout_at`` (with the consequences of an expiry), mark sessions idle for
        24 hours ``ABANDONED``, and prune a batch of what is past the retention."""
        now = self.clock()
        expired = abandoned = 0
        with self.store.transaction(write=False) as tx:
            due = tx.approvals.due(now)
            idle = tx.sessions.idle_since(now - rules.ABANDONED_AFTER)
        for approval in due:
            with _unless_another_won(), self.store.transaction() as tx:
                current = tx.approvals.get(approval.org_id, approval.approval_id)
                if current is not None and current.status is ApprovalStatus.PENDING:
                    apply_decision(tx, self.clock(), current, ApprovalStatus.EXPIRED, SYSTEM, "timed out")
                    expired += 1
        for session in idle:
            with _unless_another_won(), self.store.transaction() as tx:
                if tx.replace(
                    evolve(session, status=SessionStatus.ABANDONED),
                    status=SessionStatus.ACTIVE,
                    last_activity_at=session.last_activity_at,
                ):
                    abandoned += 1
        with self.store.transaction() as tx:
            pruned = retention.prune(tx, now - self.retention)
        return MaintenanceReport(expired, abandoned, pruned)


@contextmanager
def _unless_another_won() -> Iterator[None]:
    """One item of the round, passed over if a concurrent transaction won it: a reviewer decided the approval
    meanwhile, or PostgreSQL ended ours to break a deadlock (the next round takes it again). The round goes on
    with the others; an outage still ends it."""
    try:
        yield
    except InvalidTransitionError:
        pass
    except AgentReinUnavailableError as exc:
        if not lost_to_another_transaction(exc):
            raise

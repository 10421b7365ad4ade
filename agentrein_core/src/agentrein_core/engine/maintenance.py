"""The engine's housekeeping: approvals that time out are expired (with what an expiry means), and sessions
idle for 24 hours are abandoned. Run periodically by the server's workers or, embedded, now and then by the
SDK; every part is safe to run concurrently."""

from __future__ import annotations

from attrs import evolve, frozen

from agentrein_core import rules
from agentrein_core.engine.base import UseCases
from agentrein_core.engine.consequences import SYSTEM, apply_decision
from agentrein_core.errors import InvalidTransitionError
from agentrein_core.statuses import ApprovalStatus, SessionStatus


@frozen
class MaintenanceReport:
    expired_approvals: int
    abandoned_sessions: int


class Maintenance(UseCases):
    def maintain(self) -> MaintenanceReport:
        """Expire approvals past ``timeout_at`` (with the consequences of an expiry) and mark sessions idle
        for 24 hours ``ABANDONED``."""
        now = self.clock()
        expired = abandoned = 0
        with self.store.transaction(write=False) as tx:
            due = tx.approvals_due(now)
            idle = tx.sessions_idle_since(now - rules.ABANDONED_AFTER)
        for approval in due:
            try:
                with self.store.transaction() as tx:
                    current = tx.approval(approval.org_id, approval.approval_id)
                    if current is not None and current.status is ApprovalStatus.PENDING:
                        apply_decision(tx, self.clock(), current, ApprovalStatus.EXPIRED, SYSTEM, "timed out")
                        expired += 1
            except InvalidTransitionError:
                continue  # decided by someone else meanwhile
        for session in idle:
            with self.store.transaction() as tx:
                if tx.replace(
                    evolve(session, status=SessionStatus.ABANDONED),
                    status=SessionStatus.ACTIVE,
                    last_activity_at=session.last_activity_at,
                ):
                    abandoned += 1
        return MaintenanceReport(expired, abandoned)

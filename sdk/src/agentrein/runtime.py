"""What every wrapped client of one :class:`~agentrein.AgentRein` shares: the backend, the undo executor, and
the loop that sees a session's rollback through to its end."""

from __future__ import annotations

import logging
import threading
import time
import warnings
from datetime import timedelta

from attrs import define, field

from agentrein.backend import Backend
from agentrein.executor import ClientUndoExecutor
from agentrein_core.errors import AgentReinUnavailableError
from agentrein_core.model import Rollback
from agentrein_core.statuses import ApprovalPurpose, ApprovalStatus, RollbackStatus

log = logging.getLogger("agentrein")

#: How often embedded mode looks for expired approvals, idle sessions and rollbacks left to run.
MAINTENANCE_EVERY = 30.0
DEFAULT_TIMEOUT = 300.0
DEFAULT_POLL_INTERVAL = 2.0


@define
class Runtime:
    backend: Backend
    executor: ClientUndoExecutor
    _warned: bool = False
    _last_maintenance: float = field(default=float("-inf"))
    _lock: threading.Lock = field(factory=threading.Lock)

    def warn_unavailable(self, error: AgentReinUnavailableError) -> None:
        """``failure_mode="open"``: say once that calls now run without AgentRein's protection."""
        with self._lock:
            first, self._warned = not self._warned, True
        if first:
            warnings.warn(
                f"AgentRein is unavailable ({error}); calls run without recording, approvals or rollback",
                RuntimeWarning,
                stacklevel=6,  # the agent's own call through the wrapped client
            )
        log.warning("AgentRein unavailable: %s", error)

    def settle_rollback(
        self,
        session_id: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
    ) -> Rollback | None:
        """Drive the session's rollback until it ends, or until ``timeout`` seconds have passed.

        Runs the undo chain through the wrapped clients, waits out any rollback approval (which expires at
        the same ``timeout``), and waits for another worker that holds the job. Returns the last job seen."""
        deadline = time.monotonic() + timeout
        last: Rollback | None = None
        while True:
            job = self.backend.active_rollback(session_id)
            if job is None:
                return last if last is None else self._refresh(last)
            last = job = self.backend.run_rollback(job.rollback_id, self.executor, timedelta(seconds=timeout))
            remaining = deadline - time.monotonic()
            if job.status in (RollbackStatus.SUCCEEDED, RollbackStatus.FAILED):
                continue
            if job.status is RollbackStatus.WAITING_APPROVAL:
                pending = [
                    p
                    for p in self.backend.list_approvals(ApprovalStatus.PENDING)
                    if p.session_id == session_id and p.purpose is ApprovalPurpose.ROLLBACK
                ]
                if pending:
                    # Wait for the reviewer, at most until the approval's own deadline or ours.
                    wait = min(pending[0].time_remaining, max(remaining, 0.0))
                    decided = self.backend.wait_for_decision(pending[0].approval_id, wait)
                    if decided.status is ApprovalStatus.PENDING and decided.time_remaining <= 0:
                        self.backend.maintain()  # expire it now: the rule, not this loop, decides what follows
                        continue
                    if decided.status is not ApprovalStatus.PENDING:
                        continue
            if remaining <= 0:
                return job
            time.sleep(min(poll_interval, remaining))

    def _refresh(self, job: Rollback) -> Rollback:
        return self.backend.run_rollback(job.rollback_id, self.executor, timedelta(seconds=DEFAULT_TIMEOUT))

    def maintain_now_and_then(self) -> None:
        """Embedded mode has no workers: expire approvals, abandon idle sessions and resume rollbacks of
        sessions wrapped here, lazily, at most every ``MAINTENANCE_EVERY`` seconds."""
        now = time.monotonic()
        with self._lock:
            if now - self._last_maintenance < MAINTENANCE_EVERY:
                return
            self._last_maintenance = now
        try:
            self.backend.maintain()
            for job in self.backend.rollbacks_to_run():
                if self.executor.knows_session(job.session_id):
                    self.backend.run_rollback(job.rollback_id, self.executor, timedelta(seconds=DEFAULT_TIMEOUT))
        except AgentReinUnavailableError as exc:
            log.warning("AgentRein maintenance skipped: %s", exc)

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
from agentrein.journal import Journal
from agentrein_core.errors import AgentReinError, AgentReinUnavailableError
from agentrein_core.statuses import ApprovalStatus, RollbackStatus

log = logging.getLogger("agentrein")

#: How often embedded mode looks for expired approvals, idle sessions and rollbacks left to run.
MAINTENANCE_EVERY = 30.0
DEFAULT_TIMEOUT = 300.0
DEFAULT_POLL_INTERVAL = 2.0


@define
class Runtime:
    backend: Backend
    executor: ClientUndoExecutor
    journal: Journal
    _warned: bool = False
    _last_maintenance: float = field(default=float("-inf"))
    _lock: threading.Lock = field(factory=threading.Lock)

    def warn_unavailable(self, error: AgentReinUnavailableError) -> None:
        """``failure_mode="open"``: say once that calls now run without AgentRein's protection."""
        with self._lock:
            first, self._warned = not self._warned, True
        if first:
            warnings.warn(
                f"AgentRein is unavailable ({error}); calls run without approvals or rollback, and are journaled "
                f"in {self.journal.path} until AgentRein is back",
                RuntimeWarning,
                stacklevel=6,  # the agent's own call through the wrapped client
            )
        log.warning("AgentRein unavailable: %s", error)

    def replay_journal(self) -> None:
        """Send what was journaled while AgentRein was unavailable, before anything newer is recorded."""
        if self.journal.has_entries():
            replayed = self.journal.replay(self.backend)
            if replayed:
                log.warning("AgentRein is back: replayed %d journaled record(s)", replayed)

    def settle_rollback(
        self,
        session_id: str,
        *,
        wait: float = DEFAULT_TIMEOUT,
        approval_timeout: float = DEFAULT_TIMEOUT,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
    ) -> None:
        """Drive the session's rollback until it ends, or until ``wait`` seconds have passed.

        Runs the undo chain through the wrapped clients, waits for the reviewer of any rollback approval
        (opened with ``approval_timeout``; expired by the engine's rules when undecided), and waits for another
        worker that holds the job. Raises :class:`UndoUnavailableError` when no client here can run an undo."""
        deadline = time.monotonic() + wait
        while True:
            job = self.backend.active_rollback(session_id)
            if job is None:
                return
            job = self.backend.run_rollback(job, self.executor, timedelta(seconds=approval_timeout))
            if job.status in (RollbackStatus.SUCCEEDED, RollbackStatus.FAILED):
                continue  # another rollback may have been started meanwhile
            remaining = deadline - time.monotonic()
            if job.status is RollbackStatus.WAITING_APPROVAL:
                pending = [
                    p
                    for p in self.backend.get_session(session_id).approvals
                    if p.rollback_id == job.rollback_id and p.status is ApprovalStatus.PENDING
                ]
                if pending:
                    approval = self.backend.get_approval(pending[0].approval_id)
                    if remaining > 0 and approval.time_remaining > 0:
                        wait_for = min(approval.time_remaining, remaining)
                        approval = self.backend.wait_for_decision(approval.approval_id, wait_for)
                    if approval.status is ApprovalStatus.PENDING and approval.time_remaining <= 0:
                        self.backend.maintain()  # expire it now: the rules, not this loop, say what follows
                    if approval.status is not ApprovalStatus.PENDING or approval.time_remaining <= 0:
                        continue
            if remaining <= 0:
                return
            if self.backend.runs_undos:  # a server's run_rollback has waited for its workers already
                time.sleep(min(poll_interval, remaining))

    def settle_rollback_quietly(
        self, session_id: str, *, wait: float, approval_timeout: float, poll_interval: float
    ) -> None:
        """Settle a rollback the agent did not ask for (its call failed): the agent must see its own error,
        so AgentRein's problems here are logged, not raised."""
        try:
            self.settle_rollback(session_id, wait=wait, approval_timeout=approval_timeout, poll_interval=poll_interval)
        except AgentReinUnavailableError as exc:
            self.warn_unavailable(exc)
        except AgentReinError:
            log.exception("AgentRein could not finish rolling back session %s", session_id)

    def follow_server_rollback(self, session_id: str, *, wait: float) -> None:
        """Server mode: wait, at most ``wait`` seconds, until the session's rollback (if any) has ended or
        waits for a reviewer. Problems are logged, not raised: the decision that started it was made."""
        deadline = time.monotonic() + wait
        try:
            while time.monotonic() < deadline:
                job = self.backend.active_rollback(session_id)
                if job is None or job.status is RollbackStatus.WAITING_APPROVAL:
                    return
                self.backend.run_rollback(job, self.executor, timedelta(seconds=DEFAULT_TIMEOUT))
        except AgentReinError:
            log.exception("AgentRein could not follow the rollback of session %s", session_id)

    def maintain_now_and_then(self) -> None:
        """Embedded mode has no workers: expire approvals, abandon idle sessions and resume rollbacks of
        sessions wrapped here, lazily, at most every ``MAINTENANCE_EVERY`` seconds. A server does this itself."""
        if not self.backend.runs_undos:
            return
        now = time.monotonic()
        with self._lock:
            if now - self._last_maintenance < MAINTENANCE_EVERY:
                return
            self._last_maintenance = now
        try:
            self.backend.maintain()
        except AgentReinError as exc:
            log.warning("AgentRein maintenance stopped: %s", exc)
            return
        self.resume_rollbacks()

    def resume_rollbacks(self) -> None:
        """Run the rollbacks left to run (a crash's, one drift started) of sessions wrapped in this process."""
        try:
            for job in self.backend.rollbacks_to_run():
                if self.executor.knows_session(job.session_id):
                    self.backend.run_rollback(job, self.executor, timedelta(seconds=DEFAULT_TIMEOUT))
        except AgentReinError as exc:
            log.warning("AgentRein could not resume rollbacks: %s", exc)

"""The server's background work, in threads of its own:

- rollback workers claim running rollback jobs (leases; ``FOR UPDATE SKIP LOCKED`` on PostgreSQL) and run
  their inverses through the organisation's connector settings (:mod:`agentrein_core.settings_undo`); a job
  left by a killed server is taken over when its lease runs out, here or on another replica;
- maintenance expires approvals at ``timeoutAt`` and marks sessions idle for 24 h ``ABANDONED``;
- the verifier checks actions and completed sessions against their intent (:mod:`agentrein_core.verification`);
- one thread sends webhook deliveries, another hands events to the ``agentrein_notify`` plugins;
- on PostgreSQL a listener turns other replicas' NOTIFYs into wake-ups of this replica's long-polls.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import timedelta

from agentrein_core.engine import Engine
from agentrein_core.model import Event
from agentrein_core.rollback import UndoExecutor
from agentrein_core.statuses import RollbackStatus
from agentrein_core.store import Change
from agentrein_core.verifiers import IntentChecks
from agentrein_server import metrics
from agentrein_server.webhooks import WebhookSender

log = logging.getLogger("agentrein.server")

#: How long a rollback approval opened by the server's workers waits for a reviewer.
ROLLBACK_APPROVAL_TIMEOUT = timedelta(hours=24)
#: Idle rollback workers look for jobs this often (a request that starts one wakes them at once).
IDLE_POLL = 0.5
MAINTENANCE_EVERY = 1.0


class Workers:
    def __init__(
        self,
        engine: Engine,
        executor: UndoExecutor,
        rollback_threads: int = 2,
        *,
        checks: IntentChecks | None = None,
        sender: WebhookSender | None = None,
        notify: Callable[[Event], None] | None = None,
    ) -> None:
        self.engine = engine
        self.executor = executor
        self.rollback_threads = rollback_threads
        self.checks = checks
        self.sender = sender
        self.notify = notify
        self._stop = threading.Event()
        self._work = threading.Event()
        self._threads: list[threading.Thread] = []
        engine.store.observe(self._observe)

    def _observe(self, changes: frozenset[Change]) -> None:
        """A committed rollback change or decision (here or, through the listener, on another replica) may
        have started or resumed a rollback: the rollback workers look now rather than at their next poll."""
        if Change.ROLLBACK in changes or Change.DECISION in changes:
            self._work.set()

    def start(self, *, background: bool = True) -> None:
        """Start the threads. ``background=False``: only the listener (a server process beside the one that
        runs the background work, whose long-polls still wake at once)."""
        loops: list[tuple[str, Callable[[], None]]] = []
        if background:
            loops.append(("maintenance", self._maintain))
            loops += [(f"rollback-{n}", self._run_rollbacks) for n in range(self.rollback_threads)]
            if self.checks is not None:
                loops.append(("verifier", self._check_intents))
            if self.sender is not None:
                loops.append(("webhooks", self._send_webhooks))
            if self.notify is not None:
                loops.append(("notify", self._dispatch_events))
        if self.engine.store.dialect == "postgresql":
            loops.append(("listener", self._listen))
        for name, loop in loops:
            thread = threading.Thread(target=loop, name=f"agentrein-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()
        self._work.set()
        for thread in self._threads:
            thread.join(timeout=10)
        self._threads.clear()

    def _run_rollbacks(self) -> None:
        while not self._stop.is_set():
            try:
                job = self.engine.run_next_rollback(self.executor, ROLLBACK_APPROVAL_TIMEOUT)
            except Exception:
                log.exception("rollback worker: a job could not be advanced; it will be retried")
                self._stop.wait(IDLE_POLL)
                continue
            if job is None:
                self._work.wait(IDLE_POLL)
                self._work.clear()
            elif job.status in (RollbackStatus.SUCCEEDED, RollbackStatus.FAILED):
                metrics.ROLLBACKS_FINISHED.labels(outcome=job.status.lower()).inc()

    def _repeat(self, what: str, step: Callable[[], bool]) -> None:
        """Run ``step`` until the workers stop, pausing ``IDLE_POLL`` whenever it found nothing to do (or
        failed: logged, and tried again)."""
        while not self._stop.is_set():
            try:
                busy = step()
            except Exception:
                log.exception("%s failed; retrying", what)
                busy = False
            if not busy:
                self._stop.wait(IDLE_POLL)

    def _check_intents(self) -> None:
        checks = self.checks
        assert checks is not None

        self._repeat("intent verification", lambda: checks.run_one() is not None)

    def _send_webhooks(self) -> None:
        assert self.sender is not None
        self._repeat("sending webhooks", self.sender.send_one)

    def _dispatch_events(self) -> None:
        """Events to the notify plugins, in a thread of their own: a slow plugin holds up no webhook."""
        notify = self.notify
        assert notify is not None
        self._repeat("dispatching events", lambda: self.engine.dispatch_events(notify) > 0)

    def _maintain(self) -> None:
        while not self._stop.wait(MAINTENANCE_EVERY):
            try:
                self.engine.maintain()  # the gauges that count records are read by /metrics, when scraped
            except Exception:
                log.exception("maintenance failed; retrying")

    def _listen(self) -> None:
        """Other replicas' changes reach this one's observers (its long-polls, its rollback workers)."""
        while not self._stop.is_set():
            try:
                self.engine.store.listen(self._stop)
            except Exception:
                log.exception("listening for PostgreSQL notifications failed; reconnecting")
                self._stop.wait(1.0)

"""Embedded mode's stand-in for the server's verifier worker: intent checks run in a daemon thread, never on
the agent's path. The thread starts when a committed transaction queued a check (a confirmed or replayed
call, a completed session) or the client opens, waits for checks that are to be asked again, and ends once
none is left, so an idle process keeps no thread."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from agentrein_core.statuses import VerificationOutcome
from agentrein_core.store import Change
from agentrein_core.verifiers import IntentChecks

log = logging.getLogger("agentrein")

#: The thread ends after this long with no check due or waiting (it starts again with the next one).
IDLE_STOP = 10.0
#: The longest it sleeps before looking again.
LONGEST_NAP = 5.0
#: How long closing the client waits for a check in progress (a verifier call may take longer; it is then
#: left to finish, and its check is asked again by the next process).
STOP_WAIT = 2.0


class BackgroundChecks:
    def __init__(self, checks: IntentChecks, org_id: str, after_drift: Callable[[], None]) -> None:
        self.checks = checks
        self.engine = engine = checks.engine
        self.org_id = org_id
        self.after_drift = after_drift
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._poked = False
        self._stop = threading.Event()
        engine.store.observe(self._observe)

    def _observe(self, changes: frozenset[Change]) -> None:
        if Change.CHECK in changes:
            self.poke()

    def poke(self) -> None:
        """A check may be waiting: make sure the thread runs (it looks again even if it was about to end)."""
        with self._lock:
            if self._stop.is_set():
                return
            self._poked = True
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="agentrein-checks", daemon=True)
                self._thread.start()

    def stop(self) -> None:
        with self._lock:
            self._stop.set()
            thread = self._thread
        if thread is not None:
            thread.join(timeout=STOP_WAIT)

    def _run(self) -> None:
        idle_since = time.monotonic()
        while not self._stop.is_set():
            with self._lock:
                self._poked = False
            try:
                checked = self.checks.run_one(self.org_id)
            except Exception:
                log.exception("AgentRein intent verification failed; retrying")
                checked = None
            if checked is not None:
                idle_since = time.monotonic()
                if checked.outcome is VerificationOutcome.DRIFT_DETECTED:
                    self.after_drift()
                continue
            nap = self._until_next_check()
            if nap is None and time.monotonic() - idle_since > IDLE_STOP:
                with self._lock:
                    if not self._poked:  # a check queued just now keeps the thread
                        self._thread = None
                        return
                continue
            self._stop.wait(min(nap if nap is not None else LONGEST_NAP, LONGEST_NAP))

    def _until_next_check(self) -> float | None:
        """Seconds until this organisation's next check comes due (0: now); None when none waits."""
        try:
            with self.engine.store.transaction(write=False) as tx:
                due = tx.verifications.next_due(self.org_id)
        except Exception:
            log.exception("AgentRein could not look for intent checks")
            return LONGEST_NAP
        return None if due is None else max(0.0, (due - self.engine.clock()).total_seconds())

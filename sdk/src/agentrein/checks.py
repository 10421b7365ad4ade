"""Embedded mode's stand-in for the server's verifier worker: intent checks run in a daemon thread, never on
the agent's path. The thread starts when a check is queued (a confirmed call, a completed session) and ends
once nothing has been due for a while, so an idle process keeps no thread busy."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from agentrein_core.statuses import VerificationOutcome
from agentrein_core.verification import IntentChecks

log = logging.getLogger("agentrein")

#: The thread ends after this long with nothing due (it starts again with the next queued check).
IDLE_STOP = 10.0
IDLE_POLL = 0.5


class BackgroundChecks:
    def __init__(self, checks: IntentChecks, after_drift: Callable[[], None]) -> None:
        self.checks = checks
        self.after_drift = after_drift
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def poke(self) -> None:
        """A check was queued: make sure the thread runs."""
        with self._lock:
            if self._stop.is_set() or (self._thread is not None and self._thread.is_alive()):
                return
            self._thread = threading.Thread(target=self._run, name="agentrein-checks", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        with self._lock:
            self._stop.set()
            thread = self._thread
        if thread is not None:
            thread.join(timeout=30)

    def _run(self) -> None:
        idle_since = time.monotonic()
        while not self._stop.is_set():
            try:
                checked = self.checks.run_one()
            except Exception:
                log.exception("AgentRein intent verification failed; retrying")
                checked = None
            if checked is not None:
                idle_since = time.monotonic()
                if checked.outcome is VerificationOutcome.DRIFT_DETECTED:
                    self.after_drift()
            elif time.monotonic() - idle_since > IDLE_STOP:
                return
            else:
                self._stop.wait(IDLE_POLL)

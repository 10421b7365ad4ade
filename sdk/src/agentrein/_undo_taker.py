"""Served mode's side of the undos the server hands back (DESIGN §4a).

The server cannot run every undo: an MCP server the agent reaches over stdio is reachable from the agent's
process alone, unless the organisation's settings name it. The server offers such an undo to the process that
holds the client, and this taker, running while this process holds clients of a connector whose undos may be
handed over (:meth:`~agentrein_core.connector.Connector.may_hand_over`), takes it (``POST /undos/claim``, a
long-poll), runs it through the client the session wrapped (:class:`~agentrein._executor.ClientUndoExecutor`:
the open one, or one reopened as it was), renewing its lease while the undo runs, and reports the outcome. The
rollback waits for it meanwhile.
"""

from __future__ import annotations

import logging
import threading
import time

from attrs import define, field

from agentrein._executor import ClientUndoExecutor
from agentrein._served import ServedMode, TakenUndo
from agentrein_core.connector import Connector
from agentrein_core.errors import AgentReinError, AgentReinUnavailableError
from agentrein_core.redaction import Redactor

log = logging.getLogger("agentrein")

#: How long one claim waits at the server for an undo to be offered (while a rollback of the sessions named is
#: under way), and how often an idle process asks: short, for a server that stops waits for the requests it is
#: answering, this one too.
CLAIM_WAIT = 5.0
#: The most sessions one claim names (the server takes up to 1,000): those wrapped for last.
MOST_SESSIONS = 1000
#: How often an outcome is sent while the server cannot be reached (a pause of AFTER_TROUBLE between), well
#: within the lease the undo was taken under.
REPORT_ATTEMPTS = 10
#: A taken undo's lease is renewed after this part of it, while the undo runs: twice more before it would end.
RENEW_EVERY = 1 / 3
#: The pause after the server could not be reached (or refused a claim) before the next claim.
AFTER_TROUBLE = 2.0


@define
class UndoTaker:
    served: ServedMode
    clients: ClientUndoExecutor
    redactor: Redactor
    #: The connectors whose undos the server may hand over that this process wrapped a client of: the undos it
    #: takes.
    _connectors: set[str] = field(factory=set)
    _thread: threading.Thread | None = None
    _stopped: threading.Event = field(factory=threading.Event)
    _lock: threading.Lock = field(factory=threading.Lock)

    def wrapped(self, connector: Connector) -> None:
        """A client of ``connector`` was wrapped: take the undos of its sessions the server may hand over."""
        if not connector.may_hand_over():
            return
        with self._lock:
            self._connectors.add(connector.name)
            if self._thread is None and not self._stopped.is_set():
                self._thread = threading.Thread(target=self._take, name="agentrein-undo-taker", daemon=True)
                self._thread.start()

    def close(self) -> None:
        """Take no more undos (a claim under way ends on its own, its answer unused)."""
        self._stopped.set()

    def _take(self) -> None:
        while not self._stopped.is_set():
            with self._lock:
                connectors = sorted(self._connectors)
            sessions = self.clients.sessions_of(connectors, MOST_SESSIONS)
            began = time.monotonic()
            try:
                # The server waits with the claim only while one of these sessions is being rolled back.
                taken = self.served.claim_undo(sessions, connectors, CLAIM_WAIT) if sessions else None
            except AgentReinUnavailableError:
                self._stopped.wait(AFTER_TROUBLE)
                continue
            except AgentReinError as exc:
                log.warning("AgentRein could not take the undos handed to this process: %s", exc)
                self._stopped.wait(AFTER_TROUBLE)
                continue
            if taken is None:
                self._stopped.wait(max(0.0, CLAIM_WAIT - (time.monotonic() - began)))
            else:
                self._run(taken)  # taken: run and reported even if this process is closing meanwhile

    def _run(self, taken: TakenUndo) -> None:
        action = taken.action
        error: str | None = None
        finished = threading.Event()
        renewer = threading.Thread(
            target=self._keep_lease, args=(taken, finished), name="agentrein-undo-lease", daemon=True
        )
        renewer.start()
        try:
            self.clients.run_undo(action)
        except Exception as exc:  # the rollback stops here and says why; this process goes on
            error = self.redactor.redact_text(f"{type(exc).__name__}: {exc}")
        finally:
            finished.set()
            renewer.join()  # no renewal lands after the report (it would be refused, and said so)
        log.warning(
            "AgentRein %s the undo of %s (session %s), handed to this process: %s",
            "ran" if error is None else "could not run",
            action.api_name,
            action.session_id,
            error or "done",
        )
        self._report(taken, error)

    def _keep_lease(self, taken: TakenUndo, finished: threading.Event) -> None:
        """Renew the lease on ``taken`` every third of it while its undo runs, so a slow undo is reported within
        it; a renewal the server could not be reached for is tried again at the next third."""
        while not finished.wait(taken.lease_seconds * RENEW_EVERY):
            try:
                self.served.renew_undo(taken)
            except AgentReinUnavailableError:
                continue
            except AgentReinError as exc:  # the lease ended (the undo has failed), or the server refuses
                log.warning("AgentRein could not keep the lease on the undo of %s: %s", taken.action.api_name, exc)
                return

    def _report(self, taken: TakenUndo, error: str | None) -> None:
        action = taken.action
        for attempt in range(REPORT_ATTEMPTS):  # the same report again is answered as the first was
            try:
                self.served.report_undo(taken, error)
                return
            except AgentReinUnavailableError as exc:
                if attempt == REPORT_ATTEMPTS - 1:
                    log.warning("AgentRein could not report the undo of %s: %s", action.api_name, exc)
                time.sleep(AFTER_TROUBLE)
            except AgentReinError as exc:
                log.warning("AgentRein could not report the undo of %s: %s", action.api_name, exc)
                return

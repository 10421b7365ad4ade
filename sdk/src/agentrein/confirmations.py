"""Server mode's confirmations: a call that succeeded is confirmed with the session's next request, so a
wrapped call costs the agent one request to the server (its write-ahead record), not two.

After the call, its outcome (the redacted response and the undo) is kept in memory and appended to the
journal's outcomes file (:func:`outcomes_file`: beside the journal of :mod:`agentrein.journal`, a file of its
own so that a journal replay, which holds the journal's write lock, never holds up a confirmation), and the
agent's call returns. The outcome then travels with the session's next write-ahead record (``POST
/sessions/{id}/actions`` with ``confirm``), which the server applies first, in the same transaction; what no
next call carried within :data:`FLUSH_DELAY` a background thread sends (``PATCH``, one each), and so do
:meth:`Confirmations.close` and the interpreter's exit. Every other request of the client (reading a
session or a list, completing, rolling back, reporting a failed call) first sends what is pending and waits
for what is on its way, so:

- what the agent reads next shows its last call's outcome, never an older state;
- a rollback the agent asks for, or that a failing call causes, never runs before the session's earlier
  successes are confirmed (a failing call is still reported and rolled back at once, and the agent gets the
  rollback's outcome with its error);
- an operator's rollback that starts before a confirmation arrives is the server's to handle: the chain
  undoes an action confirmed while it runs, and a success confirmed after it ended rolls the session back
  again (``agentrein_core.engine.consequences.undo_late_success``).

Durability: the outcome is appended without an fsync (SQLite WAL, ``synchronous=NORMAL``), and deleted once
the server has it. A killed process leaves its outcomes in the file, and the next AgentRein of the same
server and key that uses the same journal sends them (one sent twice is applied once: the second is
refused as already settled, and dropped). A machine that loses power may lose the last outcomes written
before it: their actions stay ``CLEARED``, as a confirmation lost in transit leaves them (an approved one is
flagged unconfirmed after an hour).
"""

from __future__ import annotations

import atexit
import json
import logging
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from uuid import uuid4

from attrs import evolve, frozen

from agentrein_core.converter import from_wire, to_wire
from agentrein_core.errors import AgentReinError, AgentReinUnavailableError, InvalidTransitionError
from agentrein_core.model import JSON, UndoConfig
from agentrein_core.views import MAX_CONFIRMATIONS

log = logging.getLogger("agentrein")

#: How long an outcome waits for the session's next request before the background thread sends it.
FLUSH_DELAY = 0.1
#: How long the background thread waits before trying again when sending failed (doubled each time, up to
#: ``MAX_RETRY_DELAY``).
RETRY_DELAY = 2.0
MAX_RETRY_DELAY = 60.0

OUTCOMES_TABLE = (
    "CREATE TABLE IF NOT EXISTS outcomes (id INTEGER PRIMARY KEY AUTOINCREMENT, backend TEXT NOT NULL, "
    "owner TEXT NOT NULL, session_id TEXT NOT NULL, action_id TEXT NOT NULL, body TEXT NOT NULL)"
)


def outcomes_file(journal: Path) -> Path:
    """The outcomes file of the journal at ``journal`` (``journal-<digest>-outcomes.db`` by default)."""
    return journal.with_name(f"{journal.stem}-outcomes{journal.suffix}")


@frozen
class Outcome:
    """A recorded call that succeeded, not yet confirmed to the server."""

    session_id: str
    action_id: str
    response: JSON | None
    undo: UndoConfig | None
    #: Its row in the outcomes file (``None`` when it could not be written there).
    row: int | None = None
    #: When it was kept (monotonic seconds).
    since: float = 0.0

    def wire(self) -> dict[str, object]:
        """As a write-ahead record carries it (``confirm``)."""
        return {"actionId": self.action_id, "response": self.response, "undo": to_wire(self.undo)}


#: Sends one outcome on its own (``PATCH``): raises :class:`AgentReinError` when the server refuses it.
Send = Callable[[Outcome], None]


class Confirmations:
    """The outcomes of one server and key (``identity``) not yet confirmed, in the order the calls ended."""

    def __init__(self, identity: str, journal: Path, send: Send) -> None:
        self.identity = identity
        self.path = outcomes_file(journal)
        self._send = send
        self._owner = uuid4().hex  # this object's rows: another's left in the file are a killed process's
        self._cond = threading.Condition()
        self._pending: list[Outcome] = []
        self._in_flight: set[int] = set()  # ids of outcomes taken for sending, not yet settled or put back
        self._sent: list[tuple[int]] = []  # rows of outcomes the server has, still to delete from the file
        self._db: sqlite3.Connection | None = None
        self._loaded = False
        self._closed = False
        self._thread: threading.Thread | None = None
        _LIVE.add(self)

    # what the modes call ----------------------------------------------------------------------------------
    def keep(self, session_id: str, action_id: str, response: JSON | None, undo: UndoConfig | None) -> None:
        """The call of ``action_id`` succeeded: keep its outcome until it is sent."""
        outcome = Outcome(session_id, action_id, response, undo)
        with self._cond:
            self._load()
            outcome = evolve(outcome, row=self._write(outcome), since=time.monotonic())
            self._pending.append(outcome)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="agentrein-confirmations", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def take(self, session_id: str) -> list[Outcome]:
        """The session's pending outcomes (at most ``MAX_CONFIRMATIONS``), for its next write-ahead record to
        carry; the caller then reports them :meth:`settled` or :meth:`put_back`."""
        with self._cond:
            self._load()
            taken = [o for o in self._pending if o.session_id == session_id][:MAX_CONFIRMATIONS]
            if taken:
                ids = {id(o) for o in taken}
                self._pending = [o for o in self._pending if id(o) not in ids]
                self._in_flight.update(ids)
            return taken

    def settled(self, outcomes: list[Outcome]) -> None:
        """The server has these (applied, or refused for good): forget them. Their rows are deleted with the
        next outcome's write (one transaction on the agent's path, not two), or after a background send."""
        if not outcomes:
            return
        with self._cond:
            self._sent.extend((o.row,) for o in outcomes if o.row is not None)
            self._in_flight.difference_update(id(o) for o in outcomes)
            self._cond.notify_all()

    def put_back(self, outcomes: list[Outcome]) -> None:
        """These were not (or may not have been) applied: send them again, before anything kept since."""
        if not outcomes:
            return
        with self._cond:
            self._pending[:0] = outcomes
            self._in_flight.difference_update(id(o) for o in outcomes)
            self._cond.notify_all()

    def flush(self) -> None:
        """Send every pending outcome, and wait for those already on their way; raises
        :class:`AgentReinUnavailableError` (keeping the unsent ones) when the server cannot be reached."""
        with self._cond:
            self._load()
            if not self._pending and not self._in_flight:
                return
            taken, self._pending = self._pending, []
            on_the_way = set(self._in_flight)
            self._in_flight.update(id(o) for o in taken)
        for index, outcome in enumerate(taken):
            try:
                self._send(outcome)
            except AgentReinUnavailableError:
                self.put_back(taken[index:])
                raise
            except InvalidTransitionError as exc:  # confirmed already (sent twice), or overtaken meanwhile
                log.info("AgentRein confirmation of action %s already settled: %s", outcome.action_id, exc)
            except AgentReinError as exc:
                log.error(
                    "AgentRein refused the confirmation of action %s; it stays CLEARED: %s", outcome.action_id, exc
                )
            except BaseException:
                self.put_back(taken[index:])
                raise
            self.settled([outcome])
        with self._cond:
            self._cond.wait_for(lambda: on_the_way.isdisjoint(self._in_flight))

    def close(self) -> None:
        """Send what is pending (best effort: what cannot be sent stays in the outcomes file for the next
        AgentRein that opens it) and stop the background thread."""
        try:
            self.flush()
        except AgentReinError as exc:
            log.warning("AgentRein confirmations not sent at close (kept in %s): %s", self.path, exc)
        self._forget_sent()
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            if self._db is not None:
                self._db.close()
                self._db = None
        _LIVE.discard(self)

    # the outcomes file -------------------------------------------------------------------------------------
    def _load(self) -> None:
        """Once: take over the outcomes a killed process left in the file for this server and key."""
        if self._loaded:
            return
        self._loaded = True
        if not self.path.exists():
            return
        try:
            db = self._connection()
            db.execute(
                "UPDATE outcomes SET owner = ? WHERE backend = ? AND owner <> ?",
                (self._owner, self.identity, self._owner),
            )
            rows = db.execute(
                "SELECT id, body FROM outcomes WHERE backend = ? AND owner = ? ORDER BY id",
                (self.identity, self._owner),
            ).fetchall()
        except sqlite3.Error:
            log.exception("AgentRein could not read the confirmations left in %s", self.path)
            return
        left = [evolve(from_wire(json.loads(body), Outcome), row=row) for row, body in rows]
        self._pending[:0] = left
        if left:
            log.warning("AgentRein found %d unsent confirmation(s) in %s; sending them", len(left), self.path)

    def _write(self, outcome: Outcome) -> int | None:
        """Append ``outcome`` to the file, deleting the rows of those sent since the last write."""
        try:
            body = json.dumps(to_wire(outcome))
            db = self._connection()
            db.execute("BEGIN")
            try:
                self._delete_sent(db)
                cursor = db.execute(
                    "INSERT INTO outcomes (backend, owner, session_id, action_id, body) VALUES (?, ?, ?, ?, ?)",
                    (self.identity, self._owner, outcome.session_id, outcome.action_id, body),
                )
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        except (sqlite3.Error, OSError):
            # Still sent from memory; only a crash before then loses it.
            log.exception("AgentRein could not journal the outcome of action %s in %s", outcome.action_id, self.path)
            return None
        return cursor.lastrowid

    def _forget_sent(self) -> None:
        """Delete the rows of the outcomes sent (off the agent's path: after a background send, at close)."""
        with self._cond:
            if self._sent and self._db is not None:
                try:
                    self._delete_sent(self._db)
                except sqlite3.Error:
                    log.exception("AgentRein could not remove sent confirmations from %s", self.path)

    def _delete_sent(self, db: sqlite3.Connection) -> None:
        """Delete the sent rows (a crash before leaves them: sent again, they are refused as settled)."""
        db.executemany("DELETE FROM outcomes WHERE id = ?", self._sent)
        self._sent.clear()

    def _connection(self) -> sqlite3.Connection:
        if self._db is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")  # no fsync per outcome: see the module's docstring
            db.execute(OUTCOMES_TABLE)
            self._db = db
        return self._db

    # the background thread --------------------------------------------------------------------------------
    def _run(self) -> None:
        retry, not_before = RETRY_DELAY, 0.0
        while True:
            with self._cond:
                if self._closed:
                    return
                if not self._pending:
                    self._cond.wait()
                    continue
                wait = max(self._pending[0].since + FLUSH_DELAY, not_before) - time.monotonic()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
            try:
                self.flush()
                self._forget_sent()
            except Exception as exc:
                # Kept (in memory and in the file), and sent by the client's next request meanwhile: say so once
                # per outage, and try again less and less often.
                if not isinstance(exc, AgentReinUnavailableError):
                    log.exception("AgentRein could not send confirmations")
                elif retry == RETRY_DELAY:
                    log.warning("AgentRein confirmations wait for the server (kept in %s): %s", self.path, exc)
                not_before = time.monotonic() + retry
                retry = min(retry * 2, MAX_RETRY_DELAY)
            else:
                retry, not_before = RETRY_DELAY, 0.0


#: Every open :class:`Confirmations`, flushed when the interpreter exits (weakly held: one dropped unclosed
#: is forgotten with its memory, its outcomes left in the outcomes file).
_LIVE: weakref.WeakSet[Confirmations] = weakref.WeakSet()


@atexit.register
def _flush_at_exit() -> None:
    for confirmations in list(_LIVE):
        confirmations.close()

"""The SDK's local outbox: what AgentRein is still to learn, kept in one file until it is sent.

Two kinds of record wait here, in one append-only log of typed entries (:data:`Entry`):

- What happened while AgentRein could not be reached (``failure_mode="open"``): an agent whose AgentRein is
  down keeps working (a warning says so once), and every call it makes meanwhile (:class:`CallRecorded`),
  every outcome it could not report (:class:`OutcomeReported`), a session it opened (:class:`SessionStarted`,
  with an id of AgentRein's shape chosen here) and completed (:class:`SessionCompleted`), and the rollbacks
  AgentRein could not be asked for (:class:`RollbackRequested`; :class:`LoggingFailed` when action logging
  failing calls for one) are appended, durably, before the agent's call returns. Once AgentRein answers again
  they are sent in the order they were written, before anything newer is recorded: a call becomes an action
  recorded as it happened (deduplicated by the idempotency key it carried), an outcome confirms or fails its
  action, a rollback is requested and seen started. So the audit trail has no hole, and a replay repeated
  after a crash records nothing twice. The agent need not call again for it: the background thread tries
  too, after :data:`RETRY_DELAY` and then less and less often.
- Server mode's confirmations in transit (:class:`CallConfirmed`): a call that succeeded is confirmed with the
  session's next request, so a wrapped call costs the agent one request to the server, not two. Its outcome is
  appended (without an fsync: SQLite WAL, ``synchronous=NORMAL``) and kept in memory, and the call returns; the
  session's next write-ahead record carries it (``confirm``, applied first by the server); what no next call
  carried within :data:`FLUSH_DELAY` the background thread sends (``PATCH``), and so do :meth:`Outbox.close`
  and the interpreter's exit. Every other request of the client first sends what is pending
  (:meth:`Outbox.flush`), so what the agent reads next shows its last call's outcome, and a rollback
  never runs before the session's earlier successes are confirmed. A killed process's confirmations are sent
  by the next client of the same server and key on the same file (one sent twice is refused as settled, and
  dropped); a machine that loses power may lose the last ones written: their actions stay ``CLEARED``, as a
  confirmation lost in transit leaves them.

One replayer sends both kinds (:meth:`Outbox._send_waiting`, one kind's request each in :func:`_send_entry`),
one sender at a time and in the order written. It has three callers: :meth:`Outbox.replay` before anything is
recorded (what was journaled, and the confirmations written before it: later ones ride with the record),
:meth:`Outbox.flush` before any other request (everything), and the background thread (everything, when due).
An entry AgentRein refuses (its session is gone, say) is kept aside in the file with the reason; one it has
applied already counts as sent. So is a confirmation a write-ahead record carried that the server names in its
answer's ``refusedConfirmations`` (unless ``settled``: confirmed already, so sent twice).

The file is ``journal_file(identity)``: one per server and key in the user's state directory
(``~/.local/state/agentrein/journal-<digest>.db`` on Linux; ``$AGENTREIN_JOURNAL`` or
``AgentRein(journal_path=...)`` instead), so the next process on the same server and key finds it wherever it
is started; one file may hold the entries of several servers and keys, each sent only to its own. What an
older version left is read once and emptied: its two files at that place (the journal's ``entries`` table and
the ``-outcomes`` file beside it), and the working directory's ``./agentrein-journal.db`` of the versions
before the state directory.
"""

from __future__ import annotations

import atexit
import json
import logging
import math
import os
import sqlite3
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from datetime import datetime, timedelta
from pathlib import Path
from uuid import uuid4

from attrs import evolve

from agentrein._outbox_file import (
    FORMER_JOURNAL,
    JOURNAL_ENV,
    CallConfirmed,
    CallRecorded,
    Entry,
    LoggingFailed,
    OutcomeReported,
    RollbackRequested,
    SessionCompleted,
    SessionStarted,
    connect,
    entry_body,
    entry_of,
    journal_file,
    take_over_former_outbox,
)
from agentrein._port import Recorder
from agentrein_core.clock import utcnow
from agentrein_core.commands import Confirmed, Failed
from agentrein_core.converter import from_wire
from agentrein_core.errors import AgentReinError, AgentReinUnavailableError, InvalidTransitionError
from agentrein_core.ids import new_id
from agentrein_core.model import JSON, UndoConfig
from agentrein_core.read_models import MAX_CONFIRMATIONS, SessionInfo
from agentrein_core.statuses import DisplayStatus, SessionStatus

log = logging.getLogger("agentrein")

#: How long a confirmation waits for the session's next request before the background thread sends it.
FLUSH_DELAY = 0.1
#: How long a send waits for confirmations another thread's record carries before it sends on regardless.
CARRIED_WAIT = 60.0
#: How long the background thread waits before trying again when sending failed (doubled each time, up to
#: ``MAX_RETRY_DELAY``).
RETRY_DELAY = 2.0
MAX_RETRY_DELAY = 60.0

_REPLAYED = "SELECT id, kind, body FROM outbox WHERE backend = ? AND kind <> 'CallConfirmed' AND problem IS NULL"


#: Sends one confirmation on its own (``PATCH``): raises :class:`AgentReinError` when the server refuses it.
Send = Callable[[CallConfirmed], None]


class Outbox:
    """The entries waiting to be sent to the recorder ``identity`` names. The file is created only when the
    first entry is written. Processes sharing the file replay one at a time."""

    def __init__(
        self,
        identity: str,
        path: str | os.PathLike[str] | None = None,
        *,
        recorder: Recorder,
        send: Send | None = None,
    ) -> None:
        self.identity = identity
        self.path = journal_file(identity, path)
        self._recorder = recorder
        self._send = send
        self._owner = uuid4().hex  # this object's confirmations: another's left in the file are a killed process's
        self._db_lock = threading.RLock()  # taken before ``_cond`` when both are, never after
        self._replay_lock = threading.Lock()  # one sender at a time, in this process
        self._replayer: int | None = None  # the thread sending, whose own requests must not send again
        self._unreachable: tuple[float, str] | None = None  # when a sender last found AgentRein out of reach
        self._db: sqlite3.Connection | None = None
        self._waiting: int | None = None  # entries to replay: unknown until first asked
        self._warned = False
        self._cond = threading.Condition()
        self._pending: list[CallConfirmed] = []
        # Confirmations taken for sending, not yet settled or put back: their rows, by the id of each.
        self._in_flight: dict[int, float] = {}
        self._sent: list[tuple[int]] = []  # rows of confirmations the server has, still to delete from the file
        self._loaded = False
        self._closed = False
        self._thread: threading.Thread | None = None
        self._next_try = 0.0  # monotonic: when the thread may try again, after AgentRein could not be reached
        take_over_former_outbox(identity, self.path, self.path)
        if not (path or os.environ.get(JOURNAL_ENV)):
            take_over_former_outbox(identity, Path(FORMER_JOURNAL).absolute(), self.path)
        _LIVE.add(self)

    def warn_unavailable(self, error: AgentReinUnavailableError, *, stacklevel: int = 6) -> None:
        """``failure_mode="open"``: say once that calls now run without AgentRein's protection (the warning
        points ``stacklevel`` frames up: by default, at the agent's own call through the wrapped client)."""
        with self._cond:
            first, self._warned = not self._warned, True
        if first:
            warnings.warn(
                f"AgentRein is unavailable ({error}); calls run without approvals or rollback, and are journaled "
                f"in {self.path} until AgentRein is back",
                RuntimeWarning,
                stacklevel=stacklevel,
            )
        log.warning("AgentRein unavailable: %s", error)

    # the file ------------------------------------------------------------------------------------------
    @contextmanager
    def _file(self) -> Iterator[sqlite3.Connection]:
        """The file's one connection, for this thread alone meanwhile."""
        with self._db_lock:
            if self._db is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._db = connect(self.path)
            yield self._db

    def _insert(self, db: sqlite3.Connection, entry: Entry) -> int | None:
        row = (self.identity, self._owner, type(entry).__name__, entry.session_id, entry_body(entry))
        insert = "INSERT INTO outbox (backend, owner, kind, session_id, body) VALUES (?, ?, ?, ?, ?)"
        return db.execute(insert, row).lastrowid

    # what happened while AgentRein could not be reached ------------------------------------------------
    def has_entries(self) -> bool:
        """Whether entries wait to be replayed (confirmations in transit aside)."""
        with self._db_lock:
            if self._waiting is None:
                self._waiting = 0
                if self.path.exists():
                    with self._file() as db:
                        count = f"SELECT count(*) FROM ({_REPLAYED})"
                        self._waiting = int(db.execute(count, (self.identity,)).fetchone()[0])
            return self._waiting > 0

    def append(self, entry: Entry) -> None:
        """Write ``entry`` durably (synced to disk before the agent's call goes on)."""
        with self._file() as db:
            db.execute("PRAGMA synchronous=FULL")
            try:
                self._insert(db, entry)
            finally:
                db.execute("PRAGMA synchronous=NORMAL")
            self._waiting = (self._waiting or 0) + 1
        self._try_later()
        log.warning(
            "AgentRein unavailable: journaled %s for session %s in %s", _what(entry), entry.session_id, self.path
        )

    def open_session(self, agent_id: str, intent: str, sandbox: bool) -> SessionInfo:
        """A session opened here while AgentRein could not be reached: its creation is journaled (and made,
        with this id, once AgentRein answers); returns the session as it stands here."""
        session_id = new_id("ses")
        self.append(SessionStarted(session_id, agent_id, intent, sandbox, utcnow()))
        return self._offline_view(session_id)

    def complete_offline(self, session_id: str) -> SessionInfo | None:
        """Complete a session opened while AgentRein could not be reached, of which AgentRein has not learnt
        yet: the completion is journaled after its calls. Returns the session as it then stands here, or
        ``None`` if it is no such session."""
        if self.offline_session(session_id) is None:
            return None
        self.append(SessionCompleted(session_id, utcnow()))
        return self._offline_view(session_id)

    def _offline_view(self, session_id: str) -> SessionInfo:
        found = self.offline_session(session_id)
        assert found is not None  # journaled just now
        return found

    def offline_session(self, session_id: str) -> SessionInfo | None:
        """The session as it stands here if it was opened while AgentRein could not be reached and AgentRein
        has not learnt of it yet (its creation still journaled); ``None`` otherwise."""
        opened: SessionStarted | None = None
        completed_at: datetime | None = None
        for _, entry in self._entries(session_id):
            if isinstance(entry, SessionStarted):
                opened = entry
            elif isinstance(entry, SessionCompleted):
                completed_at = entry.completed_at
        if opened is None:
            return None
        status = SessionStatus.COMPLETED if completed_at is not None else SessionStatus.ACTIVE
        return SessionInfo(
            id=session_id,
            agent_id=opened.agent_id,
            intent=opened.intent,
            sandbox=opened.sandbox,
            status=status,
            display_status=DisplayStatus(status.value),
            created_at=opened.opened_at,
            last_activity_at=opened.opened_at,
            completed_at=completed_at,
            action_count=0,
            actions=[],
            approvals=[],
        )

    def _entries(self, session_id: str | None = None) -> list[tuple[int, Entry]]:
        """The entries waiting to be replayed (of ``session_id``, if given), in order."""
        if not self.has_entries():
            return []
        return [(row, entry) for row, entry in self._journaled() if session_id in (None, entry.session_id)]

    # sending: one replayer ------------------------------------------------------------------------------
    def replay(self) -> int:
        """Before anything newer is recorded: send what was journaled while AgentRein could not be reached,
        with the confirmations kept before it (those kept after it ride with the next write-ahead record, as
        always). Returns how many entries were sent; raises :class:`AgentReinUnavailableError` when AgentRein
        still cannot be reached (what was not sent stays, in order)."""
        return self._send_waiting(everything=False)

    def flush(self) -> int:
        """Before any other request of the client, from the background thread and at close: send everything
        waiting (journaled entries and confirmations alike, in the order they were written), and wait for the
        confirmations already on their way (carried by a write-ahead record in another thread). Returns and
        raises as :meth:`replay`."""
        if self._replayer == threading.get_ident():
            return 0  # the request of an entry being sent: everything written before it has been sent
        return self._send_waiting(everything=True)

    def _wait_for_carried(self, before: float) -> None:
        """Wait (at most :data:`CARRIED_WAIT`) until the confirmations written before row ``before`` that a
        write-ahead record carries in another thread are applied, or put back to be sent in their turn: what
        is sent next must not overtake them (a rollback journaled after a success must find it confirmed).
        The caller holds ``_cond`` (a re-entrant lock) and takes what it sends before letting go of it."""
        with self._cond:
            if not self._cond.wait_for(
                lambda: all(row >= before for row in self._in_flight.values()), timeout=CARRIED_WAIT
            ):
                log.warning("AgentRein: confirmations carried by a record for %.0f s; sending on", CARRIED_WAIT)

    def _send_waiting(self, *, everything: bool) -> int:
        """The one replayer both entry points share: one sender at a time, in the order entries were written."""
        if self._replayer == threading.get_ident():
            return 0  # as in flush
        self._load()
        journaled = self.has_entries()
        with self._cond:
            # The agent's path, nothing journaled: no request, no lock. A flush goes on while confirmations are
            # waiting or on their way (carried by a record, or being sent by the sender it waits for).
            if not journaled and not (everything and (self._pending or self._in_flight)):
                return 0
        asked = time.monotonic()
        with self._replay_lock:
            unreachable = self._unreachable
            if unreachable is not None and unreachable[0] > asked:
                # The sender this one waited for found AgentRein out of reach: the agent is not made to wait
                # for a second try (each may take the connection's whole timeout).
                raise AgentReinUnavailableError(unreachable[1])
            self._replayer = threading.get_ident()
            try:
                # Only journaled entries are another process's to send too; confirmations are this process's.
                with self._between_processes() if journaled else nullcontext():
                    sent = self._send_in_order(everything, journaled)
            except AgentReinUnavailableError as exc:
                self._unreachable = (time.monotonic(), str(exc))
                self._try_later()
                raise
            finally:
                self._replayer = None
                self._waiting = None
                self._forget_sent()
        if sent and journaled:
            log.warning("AgentRein is back: sent %d journaled record(s)", sent)
        return sent

    def _send_in_order(self, everything: bool, journaled: bool) -> int:
        journal = self._journaled() if journaled else []
        # The confirmations to send now: all of them, or those written before the last journaled entry.
        last = journal[-1][0] if journal else 0
        with self._cond:
            # What is sent must not overtake a confirmation a record carries in another thread: for a flush, any;
            # for a replay, those written before its first entry. Waited for and then taken under one hold of the
            # lock, so that no record takes one in between (the flush would then send nothing and return).
            if everything or journal:
                self._wait_for_carried(math.inf if everything else journal[0][0])
            taken = [c for c in self._pending if everything or (c.row is not None and c.row < last)]
            ids = {id(c) for c in taken}
            self._pending = [c for c in self._pending if id(c) not in ids]
            self._in_flight.update((id(c), _written(c.row)) for c in taken)
        # In the order written; a confirmation the file could not take goes after, in the order it was kept.
        waiting = sorted([*journal, *((c.row, c) for c in taken)], key=lambda item: _written(item[0]))
        sent = 0
        for index, (row, entry) in enumerate(waiting):
            try:
                _send_entry(self._recorder, self._send, entry)
            except AgentReinUnavailableError:
                self._put_back_from(waiting[index:])
                raise
            except AgentReinError as exc:
                log.error("AgentRein refused %s of session %s (kept aside): %s", _what(entry), entry.session_id, exc)
                self._set_aside(row, entry, str(exc))
            except Exception:
                # Not AgentRein's named error (a bug, an answer that is not JSON): the agent's call must not fail
                # for it; the entries are tried again later, in order.
                log.exception("AgentRein could not send %s of session %s", _what(entry), entry.session_id)
                self._put_back_from(waiting[index:])
                break
            except BaseException:
                self._put_back_from(waiting[index:])
                raise
            else:
                self._sent_one(row, entry)
                sent += 1
        return sent

    def _journaled(self) -> list[tuple[int, Entry]]:
        """The journaled entries waiting to be sent (confirmations in transit aside), in order."""
        with self._file() as db:
            rows = db.execute(f"{_REPLAYED} ORDER BY id", (self.identity,)).fetchall()
        return [(row_id, entry_of(kind, body)) for row_id, kind, body in rows]

    def _sent_one(self, row: int | None, entry: Entry) -> None:
        """AgentRein has ``entry``: a journaled one is deleted at once (a crash sends as little as possible
        again), a confirmation with the next write (:meth:`delivered`)."""
        if isinstance(entry, CallConfirmed):
            self.delivered([entry])
        else:
            self._update_row("DELETE FROM outbox WHERE id = ?", (row,))

    def _set_aside(self, row: int | None, entry: Entry, problem: str) -> None:
        """AgentRein refused ``entry`` (its session is gone, say): it stays in the file with the reason, sent no
        more (a confirmation the file could not take is only logged)."""
        if row is not None:
            self._update_row("UPDATE outbox SET problem = ? WHERE id = ?", (problem, row))
        if isinstance(entry, CallConfirmed):
            with self._cond:
                self._in_flight.pop(id(entry), None)
                self._cond.notify_all()

    def _put_back_from(self, waiting: list[tuple[int | None, Entry]]) -> None:
        self.put_back([entry for _, entry in waiting if isinstance(entry, CallConfirmed)])

    def _update_row(self, statement: str, parameters: tuple[object, ...]) -> None:
        with self._file() as db:
            db.execute(statement, parameters)

    @contextmanager
    def _between_processes(self) -> Iterator[None]:
        """Held while journaled entries are sent: another process's sender waits (and then finds them gone).
        The lock is SQLite's, on an empty file of its own beside the outbox, so that a sender, which waits on
        the network, never holds up a write to the outbox."""
        lock = sqlite3.connect(self.path.with_name(f"{self.path.name}.lock"), timeout=30, isolation_level=None)
        try:
            lock.execute("BEGIN EXCLUSIVE")
            yield
        finally:
            lock.close()  # and the lock with it (a killed process's too)

    # confirmations in transit (server mode) ------------------------------------------------------------
    def keep(self, session_id: str, action_id: str, response: JSON | None, undo: UndoConfig | None) -> None:
        """The call of ``action_id`` succeeded: keep its confirmation until it is sent."""
        self._load()
        confirmed = CallConfirmed(session_id, action_id, response, undo)
        confirmed = evolve(confirmed, row=self._write(confirmed), since=time.monotonic())
        with self._cond:
            self._pending.append(confirmed)
        self._start_thread()

    def take(self, session_id: str) -> list[CallConfirmed]:
        """The session's pending confirmations (at most ``MAX_CONFIRMATIONS``), for its next write-ahead record
        to carry; the caller then reports them :meth:`delivered` or :meth:`put_back`."""
        self._load()
        with self._cond:
            taken = [c for c in self._pending if c.session_id == session_id][:MAX_CONFIRMATIONS]
            if taken:
                ids = {id(c) for c in taken}
                self._pending = [c for c in self._pending if id(c) not in ids]
                self._in_flight.update((id(c), _written(c.row)) for c in taken)
            return taken

    def delivered(self, confirmations: list[CallConfirmed], *, refused: Mapping[str, str] | None = None) -> None:
        """The server has these: forget them. Their rows are deleted with the next confirmation's write (one
        transaction on the agent's path, not two), or after a background send. Those ``refused`` (by action
        id, with the reason) were not applied and their success is not on record: kept aside in the file."""
        if not confirmations:
            return
        refused = refused or {}
        for confirmation in confirmations:
            if confirmation.action_id in refused:
                problem = refused[confirmation.action_id]
                what, session = _what(confirmation), confirmation.session_id
                log.error("AgentRein refused %s of session %s (kept aside): %s", what, session, problem)
                self._set_aside(confirmation.row, confirmation, problem)
        with self._cond:
            self._sent.extend((c.row,) for c in confirmations if c.row is not None and c.action_id not in refused)
            for confirmation in confirmations:
                self._in_flight.pop(id(confirmation), None)
            self._cond.notify_all()

    def put_back(self, confirmations: list[CallConfirmed]) -> None:
        """These were not (or may not have been) applied: send them again, before anything kept since."""
        if not confirmations:
            return
        with self._cond:
            self._pending[:0] = confirmations
            for confirmation in confirmations:
                self._in_flight.pop(id(confirmation), None)
            self._cond.notify_all()

    def close(self) -> None:
        """Send the confirmations pending (best effort: what cannot be sent stays in the file for the next
        AgentRein that opens it), stop the background thread and let go of the file."""
        try:
            self.flush()
        except AgentReinError as exc:
            log.warning("AgentRein confirmations not sent at close (kept in %s): %s", self.path, exc)
        self._forget_sent()
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        with self._db_lock:
            if self._db is not None:
                self._db.close()
                self._db = None
        _LIVE.discard(self)

    def _load(self) -> None:
        """Once: take over the confirmations a killed process left in the file for this server and key."""
        if self._loaded:
            return
        with self._db_lock:
            if self._loaded:
                return
            self._loaded = True
            if not self.path.exists():
                return
            try:
                with self._file() as db:
                    mine = (self._owner, self.identity, self._owner)
                    db.execute("UPDATE outbox SET owner = ? WHERE backend = ? AND owner <> ?", mine)
                    rows = db.execute(
                        "SELECT id, body FROM outbox WHERE backend = ? AND owner = ? AND kind = 'CallConfirmed' "
                        "AND problem IS NULL ORDER BY id",
                        (self.identity, self._owner),
                    ).fetchall()
            except sqlite3.Error:
                log.exception("AgentRein could not read the confirmations left in %s", self.path)
                return
            left = [evolve(from_wire(json.loads(body), CallConfirmed), row=row) for row, body in rows]
            with self._cond:
                self._pending[:0] = left
        if left:
            log.warning("AgentRein found %d unsent confirmation(s) in %s; sending them", len(left), self.path)

    def _write(self, confirmed: CallConfirmed) -> int | None:
        """Append ``confirmed`` to the file, deleting the rows of those sent since the last write."""
        try:
            with self._file() as db:
                db.execute("BEGIN")
                try:
                    self._delete_sent(db)
                    row = self._insert(db, confirmed)
                    db.execute("COMMIT")
                except BaseException:
                    db.execute("ROLLBACK")
                    raise
                return row
        except (sqlite3.Error, OSError):
            # Still sent from memory; only a crash before then loses it.
            log.exception("AgentRein could not journal the outcome of action %s in %s", confirmed.action_id, self.path)
            return None

    def _forget_sent(self) -> None:
        """Delete the rows of the confirmations sent (off the agent's path: after a background send, at close)."""
        with self._db_lock:
            if self._db is not None:
                try:
                    self._delete_sent(self._db)
                except sqlite3.Error:
                    log.exception("AgentRein could not remove sent confirmations from %s", self.path)

    def _delete_sent(self, db: sqlite3.Connection) -> None:
        """Delete the sent rows (a crash before leaves them: sent again, they are refused as settled)."""
        with self._cond:
            sent, self._sent = self._sent, []
        db.executemany("DELETE FROM outbox WHERE id = ?", sent)

    def _try_later(self) -> None:
        """AgentRein could not be reached just now: the background thread tries again after a pause (longer
        after each failure of its own), with no call of the agent's."""
        with self._cond:
            self._next_try = max(self._next_try, time.monotonic() + RETRY_DELAY)
        self._start_thread()

    def _start_thread(self) -> None:
        """Start the background thread, once: it sends what no request of the agent's sent in time."""
        with self._cond:
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(target=self._run, name="agentrein-outbox", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def _due(self, journaled: bool) -> float | None:
        """When something is next to be sent by the background thread (monotonic seconds), if anything is: a
        journaled entry at once, a confirmation no request carried within :data:`FLUSH_DELAY`."""
        if journaled:
            return time.monotonic()
        return self._pending[0].since + FLUSH_DELAY if self._pending else None

    def _run(self) -> None:
        """The background thread: :meth:`flush` when something is due; after a failure, again less and less
        often, so what was journaled reaches AgentRein soon after it is back, with no call of the agent's."""
        retry = RETRY_DELAY
        while True:
            try:
                journaled = self.has_entries()
            except sqlite3.Error:  # the file is unreadable now: try again later rather than end the thread
                log.exception("AgentRein could not read its outbox %s", self.path)
                journaled = True
            with self._cond:
                if self._closed:
                    return
                due = self._due(journaled)
                if due is None:
                    self._cond.wait()
                    continue
                wait = max(due, self._next_try) - time.monotonic()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
            started = time.monotonic()
            try:
                self.flush()
                failed = self.has_entries()  # journaled entries left: a bug stopped them (logged)
            except AgentReinUnavailableError as exc:
                failed = True
                if retry == RETRY_DELAY:  # once per outage
                    log.warning("AgentRein records wait for the server (kept in %s): %s", self.path, exc)
            except Exception:
                failed = True
                log.exception("AgentRein could not send what its outbox holds")
            with self._cond:
                # Confirmations due before this try and still here were put back: it failed for them too.
                if failed or any(c.since + FLUSH_DELAY <= started for c in self._pending):
                    self._next_try = time.monotonic() + retry
                    retry = min(retry * 2, MAX_RETRY_DELAY)
                else:
                    retry = RETRY_DELAY


def _send_entry(recorder: Recorder, send: Send | None, entry: Entry) -> None:
    """Send one entry: where each kind becomes its request. An outcome or confirmation already applied (by an
    earlier send whose answer was lost, or overtaken: a reviewer decided meanwhile) counts as sent."""
    session_id = entry.session_id
    try:
        match entry:
            case SessionStarted():
                recorder.new_session(entry.agent_id, entry.intent, entry.sandbox, session_id=session_id)
            case CallRecorded():
                recorder.record_executed_action(session_id, entry.call)
            case OutcomeReported() if entry.succeeded and send is not None:  # served: sent now, not kept again
                send(CallConfirmed(session_id, entry.action_id, entry.response, entry.undo))
            case OutcomeReported() if entry.succeeded:
                recorder.confirm_action(session_id, entry.action_id, Confirmed(entry.response, entry.undo))
            case OutcomeReported():
                recorder.fail_action(session_id, entry.action_id, Failed(entry.error or "failed", entry.rolls_back))
            case CallConfirmed():
                assert send is not None  # kept only by a client that sends them
                send(entry)
            case SessionCompleted():
                recorder.complete_session(session_id)
            case RollbackRequested():
                timeout = timedelta(milliseconds=entry.approval_timeout_ms)
                recorder.request_rollback(session_id, trigger=entry.trigger, approval_timeout=timeout)
                _see_started(recorder, session_id)
            case LoggingFailed():
                recorder.fail_session(session_id, reason=entry.reason, connector=entry.connector)
                _see_started(recorder, session_id)
    except InvalidTransitionError as exc:
        if not isinstance(entry, OutcomeReported | CallConfirmed):
            raise
        log.info("AgentRein: %s already settled: %s", _what(entry), exc)


def _written(row: int | None) -> float:
    """Where an entry stands in the order of writing: its row (a confirmation the file could not take, last)."""
    return math.inf if row is None else row


def _see_started(recorder: Recorder, session_id: str) -> None:
    """A rollback the replay started, looked at once: its undos run in the background (embedded mode's
    supervisor, or a server's workers). The request is made either way: what stops it here is logged."""
    try:
        recorder.follow_rollback(session_id, wait=0)
    except AgentReinError as exc:
        log.warning("AgentRein started the journaled rollback of session %s; it goes on later: %s", session_id, exc)


def _what(entry: Entry) -> str:
    match entry:
        case CallRecorded():
            return f"call {entry.call.api_name}"
        case OutcomeReported() | CallConfirmed():
            return f"the outcome of action {entry.action_id}"
        case SessionStarted():
            return "its opening"
        case SessionCompleted():
            return "its completion"
        case RollbackRequested():
            return "a rollback request"
        case LoggingFailed():
            return "a rollback after action logging failed"


#: Every open :class:`Outbox`, flushed when the interpreter exits (weakly held: one dropped unclosed is
#: forgotten with its memory, its confirmations left in the file).
_LIVE: weakref.WeakSet[Outbox] = weakref.WeakSet()


@atexit.register
def _flush_at_exit() -> None:
    for outbox in list(_LIVE):
        outbox.close()

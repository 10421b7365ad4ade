"""The SDK's local outbox: what AgentRein is still to learn, kept in one file until it is sent.

Two kinds of record wait here, in one append-only log of typed entries (:data:`Entry`):

- What happened while AgentRein could not be reached (``failure_mode="open"``): an agent whose AgentRein is
  down keeps working (a warning says so once), and every call it makes meanwhile (:class:`CallRecorded`),
  every outcome it could not report (:class:`OutcomeReported`), a session it opened (:class:`SessionStarted`,
  with an id of AgentRein's shape chosen here) and completed (:class:`SessionCompleted`), and the rollbacks
  AgentRein could not be asked for (:class:`RollbackRequested`; :class:`LoggingFailed` when action logging
  failing calls for one) are appended, durably, before the agent's call returns. Once AgentRein answers again
  :meth:`Outbox.replay` sends them in the order they were written, before anything newer is recorded: a call
  becomes an action recorded as it happened (deduplicated by the idempotency key it carried), an outcome
  confirms or fails its action, a rollback is requested and seen started. So the audit trail has no hole, and
  a replay repeated after a crash records nothing twice.
- Server mode's confirmations in transit (:class:`CallConfirmed`): a call that succeeded is confirmed with the
  session's next request, so a wrapped call costs the agent one request to the server, not two. Its outcome is
  appended (without an fsync: SQLite WAL, ``synchronous=NORMAL``) and kept in memory, and the call returns; the
  session's next write-ahead record carries it (``confirm``, applied first by the server); what no next call
  carried within :data:`FLUSH_DELAY` the outbox's one background thread sends (``PATCH``), and so do
  :meth:`Outbox.close` and the interpreter's exit. Every other request of the client first sends what is
  pending (:meth:`Outbox.flush`), so what the agent reads next shows its last call's outcome, and a rollback
  never runs before the session's earlier successes are confirmed. A killed process's confirmations are sent
  by the next client of the same server and key on the same file (one sent twice is refused as settled, and
  dropped); a machine that loses power may lose the last ones written: their actions stay ``CLEARED``, as a
  confirmation lost in transit leaves them.

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
import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, get_args
from uuid import uuid4

import platformdirs
from attrs import evolve, field, frozen

from agentrein._port import Recorder
from agentrein_core.clock import utcnow
from agentrein_core.commands import Confirmed, ExecutedCall, Failed
from agentrein_core.converter import from_wire, to_wire
from agentrein_core.errors import AgentReinError, AgentReinUnavailableError, InvalidTransitionError
from agentrein_core.ids import new_id
from agentrein_core.model import JSON, UndoConfig
from agentrein_core.read_models import MAX_CONFIRMATIONS, SessionInfo
from agentrein_core.statuses import DisplayStatus, SessionStatus

log = logging.getLogger("agentrein")

JOURNAL_ENV = "AGENTREIN_JOURNAL"
#: Where versions before the state directory kept every server's and key's journal: the working directory.
FORMER_JOURNAL = "agentrein-journal.db"
#: How long a confirmation waits for the session's next request before the background thread sends it.
FLUSH_DELAY = 0.1
#: How long the background thread waits before trying again when sending failed (doubled each time, up to
#: ``MAX_RETRY_DELAY``).
RETRY_DELAY = 2.0
MAX_RETRY_DELAY = 60.0

_OUTBOX_TABLE = (
    "CREATE TABLE IF NOT EXISTS outbox (id INTEGER PRIMARY KEY AUTOINCREMENT, backend TEXT NOT NULL, "
    "owner TEXT NOT NULL, kind TEXT NOT NULL, session_id TEXT NOT NULL, body TEXT NOT NULL, problem TEXT)"
)
_COLUMNS = "backend, owner, kind, session_id, body, problem"
_REPLAYED = "SELECT id, kind, body FROM outbox WHERE backend = ? AND kind <> 'CallConfirmed' AND problem IS NULL"


def journal_file(identity: str, path: str | os.PathLike[str] | None = None) -> Path:
    """Where the outbox of the recorder ``identity`` names is: ``path``, else ``$AGENTREIN_JOURNAL``, else a
    file of its own in the user's state directory, named by a digest of ``identity`` (which names a key only
    by a digest of it): not the working directory, where a process started elsewhere would never find it."""
    given = path or os.environ.get(JOURNAL_ENV)
    if given:
        return Path(given).absolute()
    digest = hashlib.sha256(identity.encode()).hexdigest()[:16]
    return Path(platformdirs.user_state_dir("agentrein", appauthor=False)) / f"journal-{digest}.db"


def outcomes_file(journal: Path) -> Path:
    """Where the version before the outbox kept the confirmations of the journal at ``journal``."""
    return journal.with_name(f"{journal.stem}-outcomes{journal.suffix}")


# the entries -----------------------------------------------------------------------------------------------
@frozen
class SessionStarted:
    """A session opened while AgentRein could not be reached; its id was chosen here."""

    session_id: str
    agent_id: str
    intent: str
    sandbox: bool
    opened_at: datetime


@frozen
class CallRecorded:
    """A call that ran while AgentRein could not be reached (no write-ahead record), and how it ended."""

    session_id: str
    call: ExecutedCall


@frozen
class OutcomeReported:
    """How a recorded action's call ended, when AgentRein could not be told at the time."""

    session_id: str
    action_id: str
    succeeded: bool
    response: JSON | None = None
    undo: UndoConfig | None = None
    error: str | None = None
    rolls_back: bool = True


@frozen
class SessionCompleted:
    """The agent completed a session opened while AgentRein could not be reached."""

    session_id: str
    completed_at: datetime


@frozen
class RollbackRequested:
    """A rollback the agent asked for while AgentRein could not be reached."""

    session_id: str
    trigger: str
    approval_timeout_ms: int


@frozen
class LoggingFailed:
    """Action logging failed and AgentRein could not then be told: the session is to be rolled back."""

    session_id: str
    reason: str
    connector: str | None = None


@frozen
class CallConfirmed:
    """A recorded call that succeeded, its confirmation in transit to the server (server mode)."""

    session_id: str
    action_id: str
    response: JSON | None
    undo: UndoConfig | None
    #: Its row in the file (``None`` when it could not be written there); not part of the entry's body.
    row: int | None = field(default=None, eq=False)
    #: When it was kept (monotonic seconds).
    since: float = field(default=0.0, eq=False)

    def wire(self) -> dict[str, object]:
        """As a write-ahead record carries it (``confirm``)."""
        return {"actionId": self.action_id, "response": self.response, "undo": to_wire(self.undo)}


#: One thing AgentRein is to learn; stored as its kind (the class's name) and its body.
Entry = (
    SessionStarted
    | CallRecorded
    | OutcomeReported
    | SessionCompleted
    | RollbackRequested
    | LoggingFailed
    | CallConfirmed
)
_KINDS: dict[str, type[Entry]] = {kind.__name__: kind for kind in get_args(Entry)}

#: Sends one confirmation on its own (``PATCH``): raises :class:`AgentReinError` when the server refuses it.
Send = Callable[[CallConfirmed], None]


def _body(entry: Entry) -> str:
    data = to_wire(entry)
    data.pop("row", None)
    data.pop("since", None)
    return json.dumps(data)


def _entry(kind: str, body: str) -> Entry:
    return from_wire(json.loads(body), _KINDS[kind])


class Outbox:
    """The entries waiting to be sent to the recorder ``identity`` names. The file is created only when the
    first entry is written. Processes sharing the file replay one at a time."""

    def __init__(self, identity: str, path: str | os.PathLike[str] | None = None, send: Send | None = None) -> None:
        self.identity = identity
        self.path = journal_file(identity, path)
        self._send = send
        self._owner = uuid4().hex  # this object's confirmations: another's left in the file are a killed process's
        self._db_lock = threading.RLock()  # taken before ``_cond`` when both are, never after
        self._replay_lock = threading.RLock()
        self._db: sqlite3.Connection | None = None
        self._waiting: int | None = None  # entries to replay: unknown until first asked
        self._warned = False
        self._cond = threading.Condition()
        self._pending: list[CallConfirmed] = []
        self._in_flight: set[int] = set()  # ids of confirmations taken for sending, not yet settled or put back
        self._sent: list[tuple[int]] = []  # rows of confirmations the server has, still to delete from the file
        self._loaded = False
        self._closed = False
        self._thread: threading.Thread | None = None
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
                self._db = _connect(self.path)
            yield self._db

    def _insert(self, db: sqlite3.Connection, entry: Entry) -> int | None:
        row = (self.identity, self._owner, type(entry).__name__, entry.session_id, _body(entry))
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
        with self._file() as db:
            rows = db.execute(f"{_REPLAYED} ORDER BY id", (self.identity,)).fetchall()
        return [
            (row_id, entry)
            for row_id, kind, body in rows
            if (entry := _entry(kind, body)).session_id == session_id or session_id is None
        ]

    def replay(self, recorder: Recorder) -> int:
        """Send the entries to AgentRein in order (before anything newer is recorded), deleting each once it
        is recorded; stop at the first that cannot be sent because AgentRein is still unavailable. Returns how
        many were replayed. An entry AgentRein refuses (its session is gone, say) is kept aside with the
        reason, and logged."""
        if not self.has_entries():
            return 0
        replayed = 0
        with self._replaying():
            with self._file() as db:
                rows = db.execute(f"{_REPLAYED} ORDER BY id", (self.identity,)).fetchall()
            try:
                for row_id, kind, body in rows:
                    entry = _entry(kind, body)
                    try:
                        _replay(recorder, entry)
                    except AgentReinUnavailableError:
                        break
                    except AgentReinError as exc:
                        log.error("AgentRein refused journal entry %s (%s): %s", row_id, _what(entry), exc)
                        self._update_row("UPDATE outbox SET problem = ? WHERE id = ?", (str(exc), row_id))
                    except Exception:
                        # Not AgentRein's named error (a bug, an answer that is not JSON): the agent's call must
                        # not fail for it; the entries are tried again later, in order.
                        log.exception("AgentRein could not replay journal entry %s (%s)", row_id, _what(entry))
                        break
                    else:
                        # A crash before this line replays the entry again, harmlessly.
                        self._update_row("DELETE FROM outbox WHERE id = ?", (row_id,))
                        replayed += 1
            finally:
                self._waiting = None
        if replayed:
            log.warning("AgentRein is back: replayed %d journaled record(s)", replayed)
        return replayed

    def _update_row(self, statement: str, parameters: tuple[object, ...]) -> None:
        with self._file() as db:
            db.execute(statement, parameters)

    @contextmanager
    def _replaying(self) -> Iterator[None]:
        """Held while a replay runs: another thread's replay waits, and so does another process's (it then
        finds these entries gone). The lock between processes is SQLite's, on an empty file of its own beside
        the outbox, so that a replay, which waits on the network, never holds up a write to the outbox."""
        with self._replay_lock:
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
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="agentrein-outbox", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def take(self, session_id: str) -> list[CallConfirmed]:
        """The session's pending confirmations (at most ``MAX_CONFIRMATIONS``), for its next write-ahead record
        to carry; the caller then reports them :meth:`delivered` or :meth:`put_back`."""
        self._load()
        with self._cond:
            taken = [c for c in self._pending if c.session_id == session_id][:MAX_CONFIRMATIONS]
            if taken:
                ids = {id(c) for c in taken}
                self._pending = [c for c in self._pending if id(c) not in ids]
                self._in_flight.update(ids)
            return taken

    def delivered(self, confirmations: list[CallConfirmed]) -> None:
        """The server has these (applied, or refused for good): forget them. Their rows are deleted with the
        next confirmation's write (one transaction on the agent's path, not two), or after a background send."""
        if not confirmations:
            return
        with self._cond:
            self._sent.extend((c.row,) for c in confirmations if c.row is not None)
            self._in_flight.difference_update(id(c) for c in confirmations)
            self._cond.notify_all()

    def put_back(self, confirmations: list[CallConfirmed]) -> None:
        """These were not (or may not have been) applied: send them again, before anything kept since."""
        if not confirmations:
            return
        with self._cond:
            self._pending[:0] = confirmations
            self._in_flight.difference_update(id(c) for c in confirmations)
            self._cond.notify_all()

    def flush(self) -> None:
        """Send every pending confirmation, and wait for those already on their way; raises
        :class:`AgentReinUnavailableError` (keeping the unsent ones) when the server cannot be reached."""
        self._load()
        with self._cond:
            if not self._pending and not self._in_flight:
                return
            taken, self._pending = self._pending, []
            on_the_way = set(self._in_flight)
            self._in_flight.update(id(c) for c in taken)
        for index, confirmed in enumerate(taken):
            assert self._send is not None  # kept only by a client that sends them
            try:
                self._send(confirmed)
            except AgentReinUnavailableError:
                self.put_back(taken[index:])
                raise
            except InvalidTransitionError as exc:  # confirmed already (sent twice), or overtaken meanwhile
                log.info("AgentRein confirmation of action %s already settled: %s", confirmed.action_id, exc)
            except AgentReinError as exc:
                log.error(
                    "AgentRein refused the confirmation of action %s; it stays CLEARED: %s", confirmed.action_id, exc
                )
            except BaseException:
                self.put_back(taken[index:])
                raise
            self.delivered([confirmed])
        with self._cond:
            self._cond.wait_for(lambda: on_the_way.isdisjoint(self._in_flight))

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
                        "ORDER BY id",
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

    def _run(self) -> None:
        """The background thread: sends the confirmations no next request carried in time."""
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


def _connect(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")  # confirmations: no fsync each (see the module's docstring)
    db.execute(_OUTBOX_TABLE)
    return db


def _replay(recorder: Recorder, entry: Entry) -> None:
    """Send one entry (confirmations in transit aside, which :meth:`Outbox.flush` sends)."""
    session_id = entry.session_id
    match entry:
        case SessionStarted():
            recorder.new_session(entry.agent_id, entry.intent, entry.sandbox, session_id=session_id)
        case CallRecorded():
            recorder.record_executed_action(session_id, entry.call)
        case OutcomeReported():
            _replay_outcome(recorder, entry)
        case SessionCompleted():
            recorder.complete_session(session_id)
        case RollbackRequested():
            timeout = timedelta(milliseconds=entry.approval_timeout_ms)
            recorder.request_rollback(session_id, trigger=entry.trigger, approval_timeout=timeout)
            _see_started(recorder, session_id)
        case LoggingFailed():
            recorder.fail_session(session_id, reason=entry.reason, connector=entry.connector)
            _see_started(recorder, session_id)
        case CallConfirmed():
            raise AssertionError("confirmations are flushed, never replayed")


def _replay_outcome(recorder: Recorder, outcome: OutcomeReported) -> None:
    session_id = outcome.session_id
    try:
        if outcome.succeeded:
            recorder.confirm_action(session_id, outcome.action_id, Confirmed(outcome.response, outcome.undo))
        else:
            recorder.fail_action(session_id, outcome.action_id, Failed(outcome.error or "failed", outcome.rolls_back))
    except InvalidTransitionError as exc:
        # Applied by an earlier replay whose answer was lost, or overtaken (a reviewer decided meanwhile).
        log.info("journal outcome of %s already settled: %s", outcome.action_id, exc)


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


# what an older version left --------------------------------------------------------------------------------
#: The former journal's entry (one of six optional fields set) as the entry kind it is, in the order tried:
#: ``True`` where the field's own fields are the entry's, ``False`` where the entry holds it under its name.
_FORMER_FIELDS: tuple[tuple[str, type[Entry], bool], ...] = (
    ("opened", SessionStarted, True),
    ("call", CallRecorded, False),
    ("outcome", OutcomeReported, True),
    ("completedAt", SessionCompleted, False),
    ("rollback", RollbackRequested, True),
    ("loggingFailure", LoggingFailed, True),
)


def _from_former_entry(body: str) -> tuple[str, str]:
    """A former journal entry's body as this outbox's kind and body."""
    data: dict[str, Any] = json.loads(body)
    for name, kind, spread in _FORMER_FIELDS:
        value = data.get(name)
        if value is not None:
            fields = {**value} if spread else {name: value}
            return kind.__name__, _body(from_wire({"sessionId": data["sessionId"], **fields}, kind))
    raise ValueError(f"a former journal entry of no known kind: {sorted(data)}")


def _from_former_confirmation(body: str) -> tuple[str, str]:
    """A former outcomes file's confirmation as this outbox's kind and body."""
    return CallConfirmed.__name__, _body(from_wire(json.loads(body), CallConfirmed))


def take_over_former_outbox(identity: str, journal: Path, outbox: Path) -> int:
    """Move what an older version kept for the recorder ``identity`` at ``journal`` into the outbox file
    ``outbox``, in the order it would have sent it: the confirmations of its outcomes file first (its every
    request sent them first), then its journal's entries; and, when ``journal`` is another file, the entries
    of the outbox kept there. Each is read once and removed there. Returns how many records moved. A crash
    between a copy and a removal leaves a record in both: replayed twice, it is recorded once."""
    former = outcomes_file(journal)
    if not journal.exists() and not former.exists():
        return 0
    db: sqlite3.Connection | None = None
    try:
        outbox.parent.mkdir(parents=True, exist_ok=True)
        db = _connect(outbox)
        schemas: dict[str, str] = {}  # where each former file is, as this connection names it
        for schema, path in (("outcomes", former), ("journal", journal)):
            if path.absolute() == outbox.absolute():
                schemas[schema] = "main"
            elif path.exists():
                db.execute(f"ATTACH DATABASE ? AS {schema}", (str(path),))
                schemas[schema] = schema
        moves: list[tuple[str, str, Translate | None]] = []
        if "outcomes" in schemas:
            moves.append((schemas["outcomes"], "outcomes", _from_former_confirmation))
        if "journal" in schemas:
            moves.append((schemas["journal"], "entries", _from_former_entry))
        if schemas.get("journal") == "journal":
            moves.append(("journal", "outbox", None))
        moves = [move for move in moves if _holds(db, move[0], move[1], identity)]
        if not moves:
            return 0  # read only: the common case takes no write lock (a replay elsewhere may hold it)
        db.execute("BEGIN IMMEDIATE")  # a process still writing there waits, and loses nothing
        moved = sum(_move(db, schema, table, identity, translate) for schema, table, translate in moves)
        db.execute("COMMIT")
    except Exception:  # a read-only home, a record it cannot read: the agent starts all the same
        # (left there, it is taken over by the next client started here)
        log.exception("AgentRein could not take over the journal an older version left in %s", journal)
        return 0
    finally:
        if db is not None:
            db.close()
    if moved:
        log.warning(
            "AgentRein took over %d journaled record(s) an older version left in %s: now in %s",
            moved,
            journal.parent,
            outbox,
        )
    return moved


#: Turns a former record's body into this outbox's kind and body.
Translate = Callable[[str], tuple[str, str]]


def _holds(db: sqlite3.Connection, schema: str, table: str, identity: str) -> bool:
    """Whether ``schema.table`` exists and holds records of ``identity``."""
    found = f"SELECT 1 FROM {schema}.sqlite_master WHERE type = 'table' AND name = ?"
    if db.execute(found, (table,)).fetchone() is None:
        return False
    return db.execute(f"SELECT 1 FROM {schema}.{table} WHERE backend = ? LIMIT 1", (identity,)).fetchone() is not None


def _move(db: sqlite3.Connection, schema: str, table: str, identity: str, translate: Translate | None) -> int:
    """Move ``identity``'s rows of ``schema.table`` into ``main.outbox`` (``translate`` turns a former body
    into a kind and a body; ``None``: an outbox's rows, copied as they are)."""
    if translate is None:
        copy = (
            f"INSERT INTO main.outbox ({_COLUMNS}) SELECT {_COLUMNS} FROM {schema}.outbox WHERE backend = ? ORDER BY id"
        )
        moved = db.execute(copy, (identity,)).rowcount
    else:
        problem = "problem" if table == "entries" else "NULL"
        rows = db.execute(f"SELECT body, {problem} FROM {schema}.{table} WHERE backend = ? ORDER BY id", (identity,))
        moved = 0
        for body, why in rows.fetchall():
            kind, translated = translate(body)
            session_id = json.loads(translated)["sessionId"]
            insert = f"INSERT INTO main.outbox ({_COLUMNS}) VALUES (?, '', ?, ?, ?, ?)"
            db.execute(insert, (identity, kind, session_id, translated, why))
            moved += 1
    db.execute(f"DELETE FROM {schema}.{table} WHERE backend = ?", (identity,))
    return moved


#: Every open :class:`Outbox`, flushed when the interpreter exits (weakly held: one dropped unclosed is
#: forgotten with its memory, its confirmations left in the file).
_LIVE: weakref.WeakSet[Outbox] = weakref.WeakSet()


@atexit.register
def _flush_at_exit() -> None:
    for outbox in list(_LIVE):
        outbox.close()

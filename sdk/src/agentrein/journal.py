"""The local journal of ``failure_mode="open"``: what happened while AgentRein could not be reached.

An agent whose AgentRein is down keeps working (a warning says so once). Every call it makes meanwhile, and
every outcome it could not report, is written to a SQLite file in the user's state directory, one per server
and key (``~/.local/state/agentrein/journal-<digest>.db`` on Linux; ``$AGENTREIN_JOURNAL`` or
``AgentRein(journal_path=...)`` instead), so that the next process on the same server and key finds it wherever
it is started; and so are the session it opened meanwhile (with
an id of AgentRein's shape, chosen here), its completion, and the rollbacks AgentRein could not be asked for
(one the agent requested, one that action logging failing calls for). Once AgentRein answers again the
entries are replayed in the order they were written: a session is created with its id, a call becomes an
action recorded as it happened (deduplicated by the idempotency key the call carried), an outcome confirms or
fails the action it belongs to, a completion completes, a rollback is requested and seen started. So the
audit trail has no hole, and a replay repeated after a crash records nothing twice.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import threading
import warnings
from datetime import datetime, timedelta
from pathlib import Path

import platformdirs
from attrs import frozen

from agentrein.confirmations import OUTCOMES_TABLE, outcomes_file
from agentrein.port import ExecutedCall, Recorder
from agentrein_core.clock import utcnow
from agentrein_core.converter import from_wire, to_wire
from agentrein_core.errors import AgentReinError, AgentReinUnavailableError, InvalidTransitionError
from agentrein_core.ids import new_id
from agentrein_core.model import JSON, UndoConfig
from agentrein_core.statuses import DisplayStatus, SessionStatus
from agentrein_core.views import SessionInfo

log = logging.getLogger("agentrein")

JOURNAL_ENV = "AGENTREIN_JOURNAL"
#: Where versions before the state directory kept every server's and key's journal: the working directory.
FORMER_JOURNAL = "agentrein-journal.db"
_ENTRIES_TABLE = (
    "CREATE TABLE IF NOT EXISTS entries (id INTEGER PRIMARY KEY AUTOINCREMENT, backend TEXT NOT NULL, "
    "body TEXT NOT NULL, problem TEXT)"
)
_WAITING = "SELECT id, body FROM entries WHERE backend = ? AND problem IS NULL ORDER BY id"


def journal_file(identity: str, path: str | os.PathLike[str] | None = None) -> Path:
    """Where the journal of the recorder ``identity`` names is: ``path``, else ``$AGENTREIN_JOURNAL``, else a
    file of its own in the user's state directory, named by a digest of ``identity`` (which names a key only
    by a digest of it): not the working directory, where a process started elsewhere would never find it."""
    given = path or os.environ.get(JOURNAL_ENV)
    if given:
        return Path(given).absolute()
    digest = hashlib.sha256(identity.encode()).hexdigest()[:16]
    return Path(platformdirs.user_state_dir("agentrein", appauthor=False)) / f"journal-{digest}.db"


@frozen
class LateOutcome:
    """How a recorded action's call ended, when AgentRein could not be told at the time."""

    action_id: str
    succeeded: bool
    response: JSON | None = None
    undo: UndoConfig | None = None
    error: str | None = None


@frozen
class OpenedSession:
    """A session opened while AgentRein could not be reached; its id (the entry's) was chosen here."""

    agent_id: str
    intent: str
    sandbox: bool
    opened_at: datetime


@frozen
class RollbackRequest:
    """A rollback the agent asked for while AgentRein could not be reached."""

    trigger: str
    approval_timeout_ms: int


@frozen
class LoggingFailure:
    """Action logging failed and AgentRein could not then be told: the session is to be rolled back."""

    reason: str
    connector: str | None = None


@frozen
class Entry:
    """One thing AgentRein is to learn about session ``session_id``: exactly one of the fields is set."""

    session_id: str
    call: ExecutedCall | None = None
    outcome: LateOutcome | None = None
    opened: OpenedSession | None = None
    #: When the agent completed the session (one it opened while AgentRein could not be reached).
    completed_at: datetime | None = None
    rollback: RollbackRequest | None = None
    logging_failure: LoggingFailure | None = None


class Journal:
    """Entries waiting to be replayed to the recorder ``identity`` names (one file may hold entries of several
    recorders; each is replayed only to its own). The file is created only when the first entry is written.
    Processes sharing the file replay one at a time."""

    def __init__(self, identity: str, path: str | os.PathLike[str] | None = None) -> None:
        self.identity = identity
        self.path = journal_file(identity, path)
        self._lock = threading.RLock()
        self._pending: int | None = None  # unknown until first asked
        self._warned = False
        if not (path or os.environ.get(JOURNAL_ENV)):
            take_over_former_journal(identity, self.path)

    def warn_unavailable(self, error: AgentReinUnavailableError, *, stacklevel: int = 6) -> None:
        """``failure_mode="open"``: say once that calls now run without AgentRein's protection (the warning
        points ``stacklevel`` frames up: by default, at the agent's own call through the wrapped client)."""
        with self._lock:
            first, self._warned = not self._warned, True
        if first:
            warnings.warn(
                f"AgentRein is unavailable ({error}); calls run without approvals or rollback, and are journaled "
                f"in {self.path} until AgentRein is back",
                RuntimeWarning,
                stacklevel=stacklevel,
            )
        log.warning("AgentRein unavailable: %s", error)

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        conn.execute(_ENTRIES_TABLE)
        return conn

    def has_entries(self) -> bool:
        with self._lock:
            if self._pending is None:
                self._pending = self._count() if self.path.exists() else 0
            return self._pending > 0

    def _count(self) -> int:
        conn = self._connect()
        try:
            pending = "SELECT count(*) FROM entries WHERE backend = ? AND problem IS NULL"
            return int(conn.execute(pending, (self.identity,)).fetchone()[0])
        finally:
            conn.close()

    def append(self, entry: Entry) -> None:
        with self._lock:
            conn = self._connect()
            try:
                row = (self.identity, json.dumps(to_wire(entry)))
                conn.execute("INSERT INTO entries (backend, body) VALUES (?, ?)", row)
            finally:
                conn.close()
            self._pending = (self._pending or 0) + 1
        log.warning(
            "AgentRein unavailable: journaled %s for session %s in %s", _what(entry), entry.session_id, self.path
        )

    def open_session(self, agent_id: str, intent: str, sandbox: bool) -> SessionInfo:
        """A session opened here while AgentRein could not be reached: its creation is journaled (and made,
        with this id, once AgentRein answers); returns the session as it stands here."""
        session_id = new_id("ses")
        self.append(Entry(session_id, opened=OpenedSession(agent_id, intent, sandbox, utcnow())))
        return self._offline_view(session_id)

    def complete_offline(self, session_id: str) -> SessionInfo | None:
        """Complete a session opened while AgentRein could not be reached, of which AgentRein has not learnt
        yet: the completion is journaled after its calls. Returns the session as it then stands here, or
        ``None`` if it is no such session."""
        if self.offline_session(session_id) is None:
            return None
        self.append(Entry(session_id, completed_at=utcnow()))
        return self._offline_view(session_id)

    def _offline_view(self, session_id: str) -> SessionInfo:
        found = self.offline_session(session_id)
        assert found is not None  # journaled just now
        return found

    def offline_session(self, session_id: str) -> SessionInfo | None:
        """The session as it stands here if it was opened while AgentRein could not be reached and AgentRein
        has not learnt of it yet (its creation still journaled); ``None`` otherwise."""
        opened: OpenedSession | None = None
        completed_at: datetime | None = None
        for entry in self._entries():
            if entry.session_id == session_id and entry.opened is not None:
                opened = entry.opened
            if entry.session_id == session_id and entry.completed_at is not None:
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

    def _entries(self) -> list[Entry]:
        """The entries waiting to be replayed, in order."""
        if not self.has_entries():
            return []
        with self._lock:
            conn = self._connect()
            try:
                rows = conn.execute(_WAITING, (self.identity,)).fetchall()
            finally:
                conn.close()
        return [from_wire(json.loads(body), Entry) for _, body in rows]

    def replay(self, recorder: Recorder) -> int:
        """Send the entries to AgentRein in order (before anything newer is recorded), deleting each once it
        is recorded; stop at the first that cannot be sent because AgentRein is still unavailable. Returns how
        many were replayed. An entry AgentRein refuses (its session is gone, say) is kept aside with the
        reason, and logged."""
        if not self.has_entries():
            return 0
        replayed = 0
        with self._lock:
            conn = self._connect()
            try:
                # Held to the end: another process replaying the same file waits, then finds these gone.
                conn.execute("BEGIN IMMEDIATE")
                rows = conn.execute(_WAITING, (self.identity,)).fetchall()
                for row_id, body in rows:
                    entry = from_wire(json.loads(body), Entry)
                    try:
                        _apply(recorder, entry)
                    except AgentReinUnavailableError:
                        break
                    except AgentReinError as exc:
                        log.error("AgentRein refused journal entry %s (%s): %s", row_id, _what(entry), exc)
                        conn.execute("UPDATE entries SET problem = ? WHERE id = ?", (str(exc), row_id))
                    except Exception:
                        # Not AgentRein's named error (a bug, an answer that is not JSON): the agent's call must
                        # not fail for it; the entries are tried again later, in order.
                        log.exception("AgentRein could not replay journal entry %s (%s)", row_id, _what(entry))
                        break
                    else:
                        conn.execute("DELETE FROM entries WHERE id = ?", (row_id,))
                        replayed += 1
                conn.execute("COMMIT")
            finally:
                conn.close()  # without COMMIT (a crash mid-replay): every entry is replayed again, harmlessly
            self._pending = None
        if replayed:
            log.warning("AgentRein is back: replayed %d journaled record(s)", replayed)
        return replayed


def take_over_former_journal(identity: str, journal: Path) -> int:
    """Move what an older version journaled for the recorder ``identity`` in the working directory
    (``./agentrein-journal.db`` and its outcomes file, shared by every server and key) into ``journal`` and its
    outcomes file, in order, so an upgraded agent replays it rather than never finding it. Returns how many
    records moved. A crash between a file's copy and its removal leaves a record in both: replayed twice, it is
    recorded once (replays are idempotent)."""
    former = Path(FORMER_JOURNAL).absolute()
    moved = _move_rows(former, journal, _ENTRIES_TABLE, "entries", "backend, body, problem", identity)
    moved += _move_rows(
        outcomes_file(former),
        outcomes_file(journal),
        OUTCOMES_TABLE,
        "outcomes",
        "backend, owner, session_id, action_id, body",
        identity,
    )
    if moved:
        log.warning(
            "AgentRein took over %d journaled record(s) an older version left in %s: now in %s",
            moved,
            former.parent,
            journal,
        )
    return moved


def _move_rows(former: Path, to: Path, create: str, table: str, columns: str, identity: str) -> int:
    if not former.exists() or former == to.absolute():
        return 0
    conn: sqlite3.Connection | None = None
    try:
        to.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(to, timeout=30, isolation_level=None)
        conn.execute(create)
        conn.execute("ATTACH DATABASE ? AS former", (str(former),))
        found = "SELECT 1 FROM former.sqlite_master WHERE type = 'table' AND name = ?"
        if conn.execute(found, (table,)).fetchone() is None:
            return 0
        conn.execute("BEGIN IMMEDIATE")  # a process still writing the former file waits, and loses nothing
        copy = (
            f"INSERT INTO main.{table} ({columns}) SELECT {columns} FROM former.{table} WHERE backend = ? ORDER BY id"
        )
        moved = conn.execute(copy, (identity,)).rowcount
        conn.execute(f"DELETE FROM former.{table} WHERE backend = ?", (identity,))
        conn.execute("COMMIT")
        return moved
    except (OSError, sqlite3.Error):  # a read-only home, say: the agent starts all the same (left there, it is
        # taken over by the next client started here)
        log.exception("AgentRein could not take over the journal an older version left in %s", former)
        return 0
    finally:
        if conn is not None:
            conn.close()


def _apply(recorder: Recorder, entry: Entry) -> None:
    session_id = entry.session_id
    if entry.opened is not None:
        opened = entry.opened
        recorder.new_session(opened.agent_id, opened.intent, opened.sandbox, session_id=session_id)
    elif entry.call is not None:
        recorder.record_executed_action(session_id, entry.call)
    elif entry.outcome is not None:
        _apply_outcome(recorder, session_id, entry.outcome)
    elif entry.completed_at is not None:
        recorder.complete_session(session_id)
    elif entry.rollback is not None:
        timeout = timedelta(milliseconds=entry.rollback.approval_timeout_ms)
        recorder.request_rollback(session_id, trigger=entry.rollback.trigger, approval_timeout=timeout)
        _see_started(recorder, session_id)
    elif entry.logging_failure is not None:
        failure = entry.logging_failure
        recorder.fail_session(session_id, reason=failure.reason, connector=failure.connector)
        _see_started(recorder, session_id)


def _apply_outcome(recorder: Recorder, session_id: str, outcome: LateOutcome) -> None:
    try:
        if outcome.succeeded:
            recorder.confirm_action(session_id, outcome.action_id, response=outcome.response, undo=outcome.undo)
        else:
            recorder.fail_action(session_id, outcome.action_id, error=outcome.error or "failed")
    except InvalidTransitionError as exc:
        # Applied by an earlier replay whose answer was lost, or overtaken (a reviewer decided meanwhile).
        log.info("journal outcome of %s already settled: %s", outcome.action_id, exc)


def _see_started(recorder: Recorder, session_id: str) -> None:
    """A rollback the replay started: moved as far as it goes at once (embedded, its undos run here; a
    server's workers run them there). The request is made either way: what stops it here is logged."""
    try:
        recorder.settle_rollback(session_id, wait=0)
    except AgentReinError as exc:
        log.warning("AgentRein started the journaled rollback of session %s; it goes on later: %s", session_id, exc)


def _what(entry: Entry) -> str:
    if entry.call is not None:
        return f"call {entry.call.api_name}"
    if entry.outcome is not None:
        return f"the outcome of action {entry.outcome.action_id}"
    if entry.opened is not None:
        return "its opening"
    if entry.completed_at is not None:
        return "its completion"
    if entry.rollback is not None:
        return "a rollback request"
    return "a rollback after action logging failed"

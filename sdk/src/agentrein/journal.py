"""The local journal of ``failure_mode="open"``: what happened while AgentRein could not be reached.

An agent whose AgentRein is down keeps working (a warning says so once). Every call it makes meanwhile, and
every outcome it could not report, is written to a SQLite file beside the agent (``./agentrein-journal.db``,
``$AGENTREIN_JOURNAL`` or ``AgentRein(journal_path=...)``). Once AgentRein answers again the entries are
replayed in the order they were written: a call becomes an action recorded as it happened (deduplicated by
the idempotency key the call carried), an outcome confirms or fails the action it belongs to. So the audit
trail has no hole, and a replay repeated after a crash records nothing twice.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import warnings
from pathlib import Path

from attrs import frozen

from agentrein.port import ExecutedCall, Recorder
from agentrein_core.converter import from_wire, to_wire
from agentrein_core.errors import AgentReinError, AgentReinUnavailableError, InvalidTransitionError
from agentrein_core.model import JSON, UndoConfig

log = logging.getLogger("agentrein")

JOURNAL_ENV = "AGENTREIN_JOURNAL"
DEFAULT_JOURNAL = "agentrein-journal.db"


@frozen
class LateOutcome:
    """How a recorded action's call ended, when AgentRein could not be told at the time."""

    action_id: str
    succeeded: bool
    response: JSON | None = None
    undo: UndoConfig | None = None
    error: str | None = None


@frozen
class Entry:
    session_id: str
    call: ExecutedCall | None = None
    outcome: LateOutcome | None = None


class Journal:
    """Entries waiting to be replayed to the recorder ``identity`` names (one file may hold entries of several
    recorders; each is replayed only to its own). The file is created only when the first entry is written.
    Processes sharing the file replay one at a time."""

    def __init__(self, identity: str, path: str | os.PathLike[str] | None = None) -> None:
        self.identity = identity
        self.path = Path(path or os.environ.get(JOURNAL_ENV) or DEFAULT_JOURNAL)
        self._lock = threading.RLock()
        self._pending: int | None = None  # unknown until first asked
        self._warned = False

    def warn_unavailable(self, error: AgentReinUnavailableError) -> None:
        """``failure_mode="open"``: say once that calls now run without AgentRein's protection."""
        with self._lock:
            first, self._warned = not self._warned, True
        if first:
            warnings.warn(
                f"AgentRein is unavailable ({error}); calls run without approvals or rollback, and are journaled "
                f"in {self.path} until AgentRein is back",
                RuntimeWarning,
                stacklevel=6,  # the agent's own call through the wrapped client
            )
        log.warning("AgentRein unavailable: %s", error)

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        conn.execute(
            "CREATE TABLE IF NOT EXISTS entries (id INTEGER PRIMARY KEY AUTOINCREMENT, backend TEXT NOT NULL, "
            "body TEXT NOT NULL, problem TEXT)"
        )
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
                rows = conn.execute(
                    "SELECT id, body FROM entries WHERE backend = ? AND problem IS NULL ORDER BY id", (self.identity,)
                ).fetchall()
                for row_id, body in rows:
                    entry = from_wire(json.loads(body), Entry)
                    try:
                        _apply(recorder, entry)
                    except AgentReinUnavailableError:
                        break
                    except AgentReinError as exc:
                        log.error("AgentRein refused journal entry %s (%s): %s", row_id, _what(entry), exc)
                        conn.execute("UPDATE entries SET problem = ? WHERE id = ?", (str(exc), row_id))
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


def _apply(recorder: Recorder, entry: Entry) -> None:
    if entry.call is not None:
        recorder.record_executed_action(entry.session_id, entry.call)
        return
    outcome = entry.outcome
    assert outcome is not None
    try:
        if outcome.succeeded:
            recorder.confirm_action(entry.session_id, outcome.action_id, response=outcome.response, undo=outcome.undo)
        else:
            recorder.fail_action(entry.session_id, outcome.action_id, error=outcome.error or "failed")
    except InvalidTransitionError as exc:
        # Applied by an earlier replay whose answer was lost, or overtaken (a reviewer decided meanwhile).
        log.info("journal outcome of %s already settled: %s", outcome.action_id, exc)


def _what(entry: Entry) -> str:
    if entry.call is not None:
        return f"call {entry.call.api_name}"
    assert entry.outcome is not None
    return f"the outcome of action {entry.outcome.action_id}"

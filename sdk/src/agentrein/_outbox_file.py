"""The SDK's local outbox file (:mod:`agentrein._outbox` sends what it holds): where it is, the typed entries it
holds, one SQLite table of them, and what an older version left, read once and emptied."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, get_args

import platformdirs
from attrs import field, frozen

from agentrein_core.commands import ExecutedCall
from agentrein_core.converter import from_wire, to_wire
from agentrein_core.model import JSON, UndoConfig

log = logging.getLogger("agentrein")

JOURNAL_ENV = "AGENTREIN_JOURNAL"
#: Where versions before the state directory kept every server's and key's journal: the working directory.
FORMER_JOURNAL = "agentrein-journal.db"

_OUTBOX_TABLE = (
    "CREATE TABLE IF NOT EXISTS outbox (id INTEGER PRIMARY KEY AUTOINCREMENT, backend TEXT NOT NULL, "
    "owner TEXT NOT NULL, kind TEXT NOT NULL, session_id TEXT NOT NULL, body TEXT NOT NULL, problem TEXT)"
)
_COLUMNS = "backend, owner, kind, session_id, body, problem"


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


def entry_body(entry: Entry) -> str:
    data = to_wire(entry)
    data.pop("row", None)
    data.pop("since", None)
    return json.dumps(data)


def entry_of(kind: str, body: str) -> Entry:
    return from_wire(json.loads(body), _KINDS[kind])


def connect(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")  # confirmations: no fsync each (see the module's docstring)
    db.execute(_OUTBOX_TABLE)
    return db


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
            return kind.__name__, entry_body(from_wire({"sessionId": data["sessionId"], **fields}, kind))
    raise ValueError(f"a former journal entry of no known kind: {sorted(data)}")


def _from_former_confirmation(body: str) -> tuple[str, str]:
    """A former outcomes file's confirmation as this outbox's kind and body."""
    return CallConfirmed.__name__, entry_body(from_wire(json.loads(body), CallConfirmed))


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
        db = connect(outbox)
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

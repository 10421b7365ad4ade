"""One :class:`Store` per database: its connections, its transactions, and the observers told of what each
committed transaction changed (from other processes too, on PostgreSQL, through :meth:`Store.listen`).

SQLite (the default, a file beside the caller) runs in WAL mode, and write transactions take the write lock
up front (``BEGIN IMMEDIATE``) so concurrent writers queue instead of failing halfway. PostgreSQL is reached
through psycopg 3 and is the path for several processes or machines.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DataError, DBAPIError, IntegrityError, OperationalError

from agentrein_core.database import alembic_config, create_db_engine, is_outage, resolve_database_url
from agentrein_core.errors import AgentReinError, AgentReinUnavailableError, InvalidTransitionError, ValidationError
from agentrein_core.store.changes import Change, Observer
from agentrein_core.store.dialect import dialect_of
from agentrein_core.store.group_commit import GroupCommit
from agentrein_core.store.migrations import HEAD
from agentrein_core.store.transaction import Tx

_SCHEMA_VERSION = sa.text("SELECT version_num FROM alembic_version")
_CHANGES = frozenset(c.value for c in Change)

log = logging.getLogger("agentrein")


class Store:
    """A database holding AgentRein's records. ``Store(url)`` connects and brings the schema up to date."""

    def __init__(self, url: str | None = None, *, migrate: bool = True) -> None:
        self.url = resolve_database_url(url)
        self.engine = create_db_engine(self.url)
        # Made once: an engine whose connections take SQLite's write lock when their transaction begins.
        self._writer = self.engine.execution_options(write=True)
        self.dialect = self.engine.dialect.name
        self.differences = dialect_of(self.dialect)
        self._sqlite_writers = threading.RLock()
        self._held: tuple[int, Connection] | None = None  # (pid, connection): see _sqlite_writer
        self._shared = threading.local()  # .tx: this thread's shared transaction (shared_transaction)
        #: This process's one writer for work handed over to be committed with whatever arrives with it.
        self.group_commit = GroupCommit(self.shared_transaction)
        self._observers: list[Observer] = []
        #: Whether :meth:`listen` runs, so that other processes' changes reach this one's observers at once.
        self.listening = False
        if migrate:
            self.upgrade()

    def upgrade(self) -> None:
        """Apply every Alembic migration not yet applied (``agentrein db upgrade`` does the same)."""
        if self.schema_version() == HEAD:
            return
        from alembic import command  # only a database behind the code pays for importing the migrator

        config = alembic_config(self.url)
        with self._connect(write=True) as conn, self.differences.migration(conn):
            config.attributes["connection"] = conn
            command.upgrade(config, "head")

    def schema_version(self) -> str | None:
        """The Alembic revision the database is at (``None``: not migrated yet)."""
        with self._connect(write=False) as conn:
            try:
                return conn.execute(_SCHEMA_VERSION).scalar()
            except (sa.exc.OperationalError, sa.exc.ProgrammingError):
                return None  # no alembic_version table: an empty database

    def close(self) -> None:
        self.group_commit.close()
        with self._sqlite_writers:
            if self._held is not None and self._held[0] == os.getpid():
                self._release(self._held[1])
            self._held = None
        self.engine.dispose()

    def observe(self, observer: Observer) -> None:
        """Call ``observer`` with the changes of every transaction committed through this store, and (once
        :meth:`listen` runs) of those other processes commit on the same PostgreSQL database."""
        self._observers.append(observer)

    def unobserve(self, observer: Observer) -> None:
        """Stop calling ``observer`` (one that stops before the store closes: a supervisor, say)."""
        if observer in self._observers:
            self._observers.remove(observer)

    def changed(self, changes: frozenset[Change]) -> None:
        """Tell the observers; one that fails is logged, and the others are told all the same."""
        if not changes:
            return
        for observer in list(self._observers):  # a copy: an observer may be removed meanwhile
            try:
                observer(changes)
            except Exception:
                log.exception("an observer of the store failed on %s", sorted(changes))

    def listen(self, stop: threading.Event) -> None:
        """PostgreSQL only: pass the changes other processes announce on to this store's observers, until
        ``stop`` is set. Blocks; run it in a thread of its own. Connection errors propagate (the caller
        reconnects)."""

        def heard(payload: str) -> None:
            if payload in _CHANGES:
                self.changed(frozenset({Change(payload)}))

        def listening(now: bool) -> None:
            self.listening = now

        self.differences.listen(self.url, stop, heard, listening)

    @contextmanager
    def _connect(self, write: bool) -> Iterator[Connection]:
        with _outages():
            if write and self.differences.one_writer:
                with self._sqlite_writer() as conn:
                    yield conn
            else:
                with (self._writer if write else self.engine).connect() as conn:
                    yield conn

    @contextmanager
    def _sqlite_writer(self) -> Iterator[Connection]:
        """SQLite has one writer at a time. Writers of this process queue on a lock, which hands over at once,
        rather than in SQLite's busy handler, which sleeps (up to 100 ms) between looks at the file lock; and
        they share one connection, kept open, so a write pays for no pool checkout and return. A connection
        a failed write leaves behind, or one a parent process opened before a fork, is not reused."""
        with self._sqlite_writers:
            held = self._held
            if held is not None and (held[0] != os.getpid() or held[1].closed):
                held = None
            if held is None or held[1].in_transaction():  # none yet, or a write inside a write: its own
                conn = self._writer.connect()
                if held is None:
                    self._held = (os.getpid(), conn)
            else:
                conn = held[1]
            try:
                yield conn
            except BaseException:
                self._release(conn)
                raise
            if self._held is None or self._held[1] is not conn:
                conn.close()

    def _release(self, conn: Connection) -> None:
        if self._held is not None and self._held[1] is conn:
            self._held = None
        conn.close()

    @contextmanager
    def snapshot(self) -> Iterator[Tx]:
        """A read of several statements that all see the database as it was at the first: for a page whose parts
        must agree (a reviewer's card reads an approval, then counts its session's actions less its own)."""
        with _translated(), self._connect(write=False) as conn, self.differences.one_snapshot(conn).begin():
            yield Tx(conn, self.differences)

    @contextmanager
    def transaction(self, write: bool = True) -> Iterator[Tx]:
        """One unit of work: everything inside commits together or not at all. A write that a concurrent one
        made impossible is :class:`InvalidTransitionError`; a value the database cannot hold (PostgreSQL
        refuses NUL characters, say) is :class:`ValidationError`; either way nothing is written. A database
        that cannot serve now (unreachable, locked, full) is :class:`AgentReinUnavailableError`; any other
        database error is :class:`AgentReinError` (500): the store failed.

        Inside :meth:`shared_transaction` (the group commit's writer), it is a savepoint of the shared
        transaction instead: undone alone when it fails, committed with the others."""
        shared: Tx | None = getattr(self._shared, "tx", None)
        if shared is not None:
            with _translated(), _outages(), shared.savepoint():
                yield shared
            return
        with _translated(), self._connect(write) as conn, conn.begin():
            tx = Tx(conn, self.differences)
            yield tx
        self.changed(frozenset(tx.changes))  # committed: only now may anyone act on it

    @contextmanager
    def shared_transaction(self) -> Iterator[Callable[[], bool]]:
        """Until the block ends, every transaction this thread opens is a savepoint of one transaction,
        committed (and told to the observers) when the block ends: :class:`~.group_commit.GroupCommit`'s. It
        yields a look at whether that transaction is still open (the database may have ended it)."""
        with _translated(), self._connect(write=True) as conn, conn.begin(), self.differences.brief_lock_waits(conn):
            tx = Tx(conn, self.differences)
            self._shared.tx = tx
            try:
                yield lambda: self.differences.in_transaction(conn)
            finally:
                self._shared.tx = None
        self.changed(frozenset(tx.changes))  # committed: only now may anyone act on it


@contextmanager
def _outages() -> Iterator[None]:
    try:
        yield
    except OperationalError as exc:
        if not is_outage(exc):
            raise  # the database answered, and failed: an error of AgentRein's, not an outage
        # Unreachable, locked past the busy timeout, out of disk...: the store cannot serve us now.
        raise AgentReinUnavailableError(f"the AgentRein database is unavailable: {exc.orig}") from exc
    except sa.exc.TimeoutError as exc:
        raise AgentReinUnavailableError(f"no database connection free in time ({exc})") from exc


@contextmanager
def _translated() -> Iterator[None]:
    """A database error as the :meth:`Store.transaction` it ended says."""
    try:
        yield
    except IntegrityError as exc:
        raise InvalidTransitionError(f"a concurrent change conflicts with this one; try again ({exc.orig})") from exc
    except DataError as exc:
        raise ValidationError("request", f"a value the database cannot store ({exc.orig})") from exc
    except DBAPIError as exc:
        # Named, so a caller can tell AgentRein's failure from its own; the database's words stay in the
        # cause (a traceback, the server's log), for they may quote what was stored.
        raise AgentReinError(f"the AgentRein database failed ({type(exc.orig).__name__})") from exc

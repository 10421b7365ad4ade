"""Every difference between the two databases the store runs on, and nothing else: the rest of ``store/``
writes one query for both.

SQLite (the default, a file beside the caller) has one writer at a time, and no other process to tell of a
change. PostgreSQL has many: it locks rows (``FOR UPDATE``, and ``SKIP LOCKED`` so that replicas claiming at
once take different work), serialises migrators with an advisory lock, and announces committed changes to
other processes with NOTIFY, which :meth:`PostgreSQL.listen` receives.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from agentrein_core.errors import AgentReinError

#: The PostgreSQL channel on which committed changes are announced, so that every replica's long-polls and
#: workers wake at once.
EVENTS_CHANNEL = "agentrein_events"
_NOTIFY = sa.text("SELECT pg_notify(:channel, :payload)")
#: Any number the migrators of one database agree on.
_MIGRATION_LOCK = sa.text("SELECT pg_advisory_xact_lock(7346121)")
#: How long a group commit's record waits for a row another transaction holds (PostgreSQL) before it gives way:
#: undone alone, and written again alone once the group is committed. A group holds the rows of all its records
#: until it commits, so a record waiting for a transaction that waits for one of them (a decision holding the
#: call's approval and wanting its session) would otherwise deadlock, and PostgreSQL would end one of the two
#: after its ``deadlock_timeout`` (1 s), perhaps the decision (503). Well under that, so the group gives way first.
GROUP_LOCK_WAIT = "200ms"

S = TypeVar("S", bound=sa.Select[Any])


class Dialect:
    """SQLite's way; :class:`PostgreSQL` overrides where it differs."""

    name = "sqlite"
    #: Whether writers queue for the one write lock of the file (the store then hands them one connection).
    one_writer = True
    #: Whether ``SELECT … FOR UPDATE`` holds rows (SQLite's writer already holds the whole file).
    locks_rows = False
    #: Whether a statement that fails (a unique key refusing a row) leaves its transaction unusable until it rolls
    #: back to a savepoint; in SQLite it undoes itself alone, and the transaction goes on.
    failure_ends_transaction = False

    def skip_locked(self, stmt: S) -> S:
        """``stmt`` taking its rows so that a concurrent claimer skips them rather than waiting or sharing."""
        return stmt

    @contextmanager
    def migration(self, conn: Connection) -> Iterator[None]:
        """A transaction for migrations, committed when the block ends. SQLite's writer lock makes other migrators
        wait. A migration may rebuild a table (SQLite alters a table by copying it), which foreign keys would
        refuse while rows point at it (dropping the old table deletes it first): they are off meanwhile (a
        pragma that only counts outside a transaction), and every row's parent is looked for before the commit."""
        driver: Any = conn.connection.driver_connection
        driver.execute("PRAGMA foreign_keys=OFF")
        try:
            with conn.begin():
                yield
                orphans = conn.exec_driver_sql("PRAGMA foreign_key_check").all()
                if orphans:
                    raise AgentReinError(
                        f"a migration left rows whose parent is gone (table, rowid, parent): {orphans}"
                    )
        finally:
            driver.execute("PRAGMA foreign_keys=ON")

    def one_snapshot(self, conn: Connection) -> Connection:
        """``conn``, whose next transaction reads one snapshot in all its statements (SQLite's reads always do)."""
        return conn

    def notify(self, conn: Connection, payload: str) -> None:
        """Tell other processes ``payload`` when the transaction of ``conn`` commits (none listen on SQLite)."""

    def in_transaction(self, conn: Connection) -> bool:
        """Whether the driver's transaction on ``conn`` is still open: SQLite ends it by itself on some errors
        (a full disk, an I/O error), after which statements would commit one by one."""
        return bool(conn.connection.dbapi_connection.in_transaction)  # type: ignore[union-attr]

    @contextmanager
    def brief_lock_waits(self, conn: Connection) -> Iterator[None]:
        """Within the block, a statement in the transaction of ``conn`` waits no longer than
        :data:`GROUP_LOCK_WAIT` for a row another transaction holds; its commit, after the block, waits as usual
        (SQLite locks no rows: its one writer waits for the file, as always)."""
        yield

    def upsert(self, conn: Connection, table: sa.Table, row: Mapping[str, Any]) -> None:
        """Write ``row`` over the row of ``table`` with the same primary key, or insert it."""
        keys = [c.name for c in table.primary_key.columns]
        stmt = self._insert(table).values(**row)
        conn.execute(
            stmt.on_conflict_do_update(index_elements=keys, set_={k: v for k, v in row.items() if k not in keys})
        )

    def _insert(self, table: sa.Table) -> Any:  # each dialect's Insert has its own ON CONFLICT
        return sqlite.insert(table)

    def listen(
        self, url: str, stop: threading.Event, heard: Callable[[str], None], started: Callable[[bool], None]
    ) -> None:
        """Call ``heard`` with each payload other processes announce until ``stop`` is set; ``started`` is told
        once listening starts (True) and once it ends (False). Connection errors propagate."""
        raise TypeError("only PostgreSQL announces other processes' changes")


class PostgreSQL(Dialect):
    name = "postgresql"
    one_writer = False
    locks_rows = True
    failure_ends_transaction = True

    def skip_locked(self, stmt: S) -> S:
        return stmt.with_for_update(skip_locked=True)

    @contextmanager
    def migration(self, conn: Connection) -> Iterator[None]:
        with conn.begin():
            conn.execute(_MIGRATION_LOCK)  # one migrator at a time when several processes start together
            yield

    def one_snapshot(self, conn: Connection) -> Connection:
        # Read committed takes a snapshot per statement; the pool sets the level back when the connection returns.
        return conn.execution_options(isolation_level="REPEATABLE READ")

    def notify(self, conn: Connection, payload: str) -> None:
        conn.execute(_NOTIFY, {"channel": EVENTS_CHANNEL, "payload": payload})  # NOTIFY is delivered on commit

    def in_transaction(self, conn: Connection) -> bool:
        from psycopg.pq import TransactionStatus

        # psycopg sends BEGIN with the first statement (IDLE until then); PostgreSQL ends a transaction only
        # with its connection, or leaves it failed by an error outside any savepoint.
        status = conn.connection.dbapi_connection.info.transaction_status  # type: ignore[union-attr]
        return status in (TransactionStatus.IDLE, TransactionStatus.INTRANS)

    @contextmanager
    def brief_lock_waits(self, conn: Connection) -> Iterator[None]:
        conn.exec_driver_sql(f"SET LOCAL lock_timeout = '{GROUP_LOCK_WAIT}'")
        yield
        # A commit that announces a change (NOTIFY) takes the server's one notification lock, which every other
        # announcing commit holds through its own flush: a commit given up would answer every record an outage.
        conn.exec_driver_sql("SET LOCAL lock_timeout TO DEFAULT")

    def _insert(self, table: sa.Table) -> Any:
        return postgresql.insert(table)

    def listen(
        self, url: str, stop: threading.Event, heard: Callable[[str], None], started: Callable[[bool], None]
    ) -> None:
        import psycopg
        from psycopg import sql

        dsn = sa.engine.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(EVENTS_CHANNEL)))
            started(True)
            try:
                while not stop.is_set():
                    for note in conn.notifies(timeout=0.5):
                        heard(note.payload)
            finally:
                started(False)


def dialect_of(name: str) -> Dialect:
    """The differences of the database SQLAlchemy names ``name`` (``sqlite`` or ``postgresql``)."""
    return PostgreSQL() if name == "postgresql" else Dialect()

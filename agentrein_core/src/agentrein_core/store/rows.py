"""What every aggregate of a transaction shares (:class:`Rows`): records by id, inserted whole, and written over
their row by compare-and-set (:meth:`Rows.replace`).
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

import agentrein_core.store.schema as schema
from agentrein_core.converter import from_columns, from_row, from_rows, to_row
from agentrein_core.model import (
    Action,
    ApiKey,
    Approval,
    BeforeState,
    ConnectorConfig,
    Delivery,
    Event,
    Organisation,
    OrganisationSettings,
    Policy,
    Rollback,
    Session,
    UndoHandoff,
    User,
    Verification,
    Webhook,
)
from agentrein_core.store.changes import Change
from agentrein_core.store.dialect import Dialect
from agentrein_core.store.prepared import Prepared, run_on_driver

#: Each record's table and primary key.
TABLES: dict[type[Any], tuple[sa.Table, str]] = {
    Organisation: (schema.organisations, "org_id"),
    Session: (schema.sessions, "session_id"),
    Action: (schema.actions, "action_id"),
    Approval: (schema.approvals, "approval_id"),
    Policy: (schema.policies, "policy_id"),
    Rollback: (schema.rollbacks, "rollback_id"),
    UndoHandoff: (schema.undo_handoffs, "handoff_id"),
    BeforeState: (schema.before_states, "precapture_id"),
    ApiKey: (schema.api_keys, "key_id"),
    User: (schema.users, "user_id"),
    Verification: (schema.verifications, "verification_id"),
    Event: (schema.events, "event_id"),
    Webhook: (schema.webhooks, "webhook_id"),
    Delivery: (schema.deliveries, "delivery_id"),
}
#: Records written whole over their row, or inserted (:meth:`Rows.upsert`).
_UPSERTED: dict[type[Any], sa.Table] = {
    ConnectorConfig: schema.connector_configs,
    OrganisationSettings: schema.organisation_settings,
}

T = TypeVar("T")


def _select_by_id(table: sa.Table, key: str, scoped: bool) -> sa.Select[Any]:
    """``SELECT * FROM table WHERE key = :key [AND org_id = :org]``."""
    stmt = sa.select(table).where(table.c[key] == sa.bindparam("key"))
    return stmt.where(table.c.org_id == sa.bindparam("org")) if scoped else stmt


_UNSCOPED = (Organisation, ApiKey, Event)  # looked up by id alone
#: Prepared: a recorded call inserts its action and its intent check (``bench/overhead.py``'s WRITE rows; on
#: SQLite under load, 61 us an insert of an action against 655 us through SQLAlchemy's execute); the other
#: records share the one insert path.
INSERT = {
    cls: Prepared(table.insert(), columns=[c.key for c in table.columns if c.key not in schema.STORE_ONLY])
    for cls, (table, _) in TABLES.items()
}
_SELECTS = {cls: _select_by_id(table, key, scoped=cls not in _UNSCOPED) for cls, (table, key) in TABLES.items()}
#: Prepared: on the server, each call an agent key records or confirms reads its session (and action) by id to
#: check the key opened it (46 us against 132 us through SQLAlchemy's execute, on SQLite under load).
BY_ID = {cls: Prepared(stmt) for cls, stmt in _SELECTS.items()}
#: The same, holding the row until the transaction ends (where rows are locked: PostgreSQL); not on the hot path.
#: ``FOR NO KEY UPDATE``: another writer of the row waits, a record inserted that refers to it does not (its
#: foreign-key check takes ``KEY SHARE``, which ``FOR UPDATE`` would block: two use cases deadlocked on that).
BY_ID_LOCKED = {cls: stmt.with_for_update(key_share=True) for cls, stmt in _SELECTS.items()}


#: Prepared: the compare-and-set writes (:meth:`Rows.replace`, :meth:`Rows.update`; a rollback makes three an
#: undo, and SQLAlchemy's building and executing each cost several times the statement), one for each record
#: type, the columns it sets, the columns expected (each with ``=``, or ``IS NULL`` when expected None) and
#: whether it answers the whole row.
_GUARDED: dict[tuple[type[Any], tuple[str, ...], tuple[tuple[str, bool], ...], bool], Prepared] = {}


def _guarded(cls: type[Any], columns: tuple[str, ...], expected: dict[str, Any], whole: bool) -> Prepared:
    """``UPDATE table SET <columns> WHERE <its key> = :written AND <expected> RETURNING <its key, or every
    column when whole>``; each expected value is bound as ``expected_<column>``."""
    shape = (cls, columns, tuple(sorted((column, value is None) for column, value in expected.items())), whole)
    found = _GUARDED.get(shape)
    if found is None:
        table, key = TABLES[cls]
        stmt = table.update().where(table.c[key] == sa.bindparam("written"))
        for column, is_null in shape[2]:
            c = table.c[column]
            stmt = stmt.where(c.is_(None) if is_null else c == sa.bindparam(f"expected_{column}"))
        answered = table.columns if whole else [table.c[key]]
        found = _GUARDED.setdefault(shape, Prepared(stmt.returning(*answered), columns=columns))
    return found


def _guard_params(key: str, values: dict[str, Any], expected: dict[str, Any]) -> dict[str, Any]:
    params = {**values, "written": key}
    params.update({f"expected_{column}": value for column, value in expected.items() if value is not None})
    return params


def _known(table: sa.Table, values: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(values) - set(table.c.keys()))
    if unknown:  # said in our words rather than SQLAlchemy's compile error
        raise ValueError(f"{table.name} has no column {', '.join(unknown)}")
    return values


#: Session ids bound in one ``IN (…)``, well within SQLite's and PostgreSQL's limits on parameters.
_CHUNK = 5_000
#: Savepoint names, unique in the process (a savepoint inside another must not take its name).
_SAVEPOINTS = itertools.count()


def of_sessions(
    rows: Rows, cls: type[T], table: sa.Table, session_ids: Sequence[str], *order: sa.ColumnElement[Any]
) -> dict[str, list[T]]:
    """The ``cls`` records of each of ``session_ids``, in ``order``, in one query (per 5,000 sessions)."""
    found: list[T] = []
    for i in range(0, len(session_ids), _CHUNK):
        ids = session_ids[i : i + _CHUNK]
        found += rows.all(cls, sa.select(table).where(table.c.session_id.in_(ids)).order_by(*order))
    grouped: dict[str, list[T]] = defaultdict(list)
    for record in found:
        grouped[record.session_id].append(record)  # type: ignore[attr-defined]
    return grouped


class Rows:
    """The reads and writes of one transaction that every aggregate shares; :class:`~.transaction.Tx` adds the
    aggregates."""

    def __init__(self, conn: Connection, dialect: Dialect) -> None:
        self.conn = conn
        self.dialect = dialect
        #: What this transaction announces when it commits (:meth:`announce`).
        self.changes: set[Change] = set()

    def insert(self, record: Any, **extra: Any) -> None:
        INSERT[type(record)].run(self.conn, {**to_row(record), **extra})

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """A part of the transaction that can fail alone: its writes are undone, the rest's are kept (and
        so is what it announced: undone too). Its statements run on the driver, as the prepared ones do
        (SQLAlchemy's nested transaction cost a group commit a tenth of the server's time)."""
        announced = set(self.changes)
        name = f"part_{next(_SAVEPOINTS)}"
        run_on_driver(self.conn, f"SAVEPOINT {name}")
        try:
            yield
        except BaseException as exc:
            self.changes = announced
            try:
                run_on_driver(self.conn, f"ROLLBACK TO SAVEPOINT {name}")
                run_on_driver(self.conn, f"RELEASE SAVEPOINT {name}")
            # The database ended the transaction itself, or an interrupt dropped the connection: the cause is what
            # matters.
            except (sa.exc.DBAPIError, sa.exc.PendingRollbackError):
                raise exc from None
            raise
        run_on_driver(self.conn, f"RELEASE SAVEPOINT {name}")

    def insert_once(self, record: Any, **extra: Any) -> bool:
        """Insert ``record`` unless a unique key says it is there already (False then; nothing written)."""
        try:
            with self.savepoint() if self.dialect.failure_ends_transaction else nullcontext():
                self.insert(record, **extra)
        except IntegrityError:
            return False
        return True

    def replace(self, record: T, **expected: Any) -> bool:
        """Write ``record`` over its row if the row still has the ``expected`` column values."""
        row = to_row(record)
        written = _guarded(type(record), tuple(row), expected, whole=False)
        return len(written.run(self.conn, _guard_params(row[TABLES[type(record)][1]], row, expected))) == 1

    def update(self, cls: type[T], key: str, values: dict[str, Any], **expected: Any) -> T | None:
        """Set only ``values`` on the ``cls`` record ``key`` if it still has the ``expected`` column values; the
        record as stored afterwards, or None if it did not match."""
        written = _guarded(cls, tuple(_known(TABLES[cls][0], values)), expected, whole=True)
        return self.prepared_first(cls, written, _guard_params(key, values, expected))

    def upsert(self, record: Any) -> None:
        """Write ``record`` over its row, or insert it (if another request inserted it meanwhile, ours is the
        newer and overwrites it)."""
        self.dialect.upsert(self.conn, _UPSERTED[type(record)], to_row(record))

    def one(self, cls: type[T], key: str, org_id: str | None = None, lock: bool = False) -> T | None:
        """The ``cls`` record with id ``key`` in organisation ``org_id``; ``lock`` holds its row (PostgreSQL)."""
        if "\x00" in key:
            return None  # no id holds one (and PostgreSQL cannot even compare it)
        params = {"key": key, "org": org_id}
        if lock and self.dialect.locks_rows:
            return self.first(cls, BY_ID_LOCKED[cls], params)
        return self.prepared_first(cls, BY_ID[cls], params)

    def hold(self, stmt: sa.Select[Any], params: dict[str, Any] | None = None) -> None:
        """Hold the rows ``stmt`` selects until the transaction ends (PostgreSQL; SQLite has one writer), in its
        order, ``FOR NO KEY UPDATE``: the store's lock order, taken before they are written."""
        if self.dialect.locks_rows:
            self.conn.execute(stmt.with_for_update(key_share=True), params).all()

    def held(self, cls: type[T], stmt: sa.Select[Any], params: dict[str, Any] | None = None) -> list[T]:
        """The ``cls`` records ``stmt`` selects, their rows held as :meth:`hold` holds them (PostgreSQL)."""
        return self.all(cls, stmt.with_for_update(key_share=True) if self.dialect.locks_rows else stmt, params)

    def first(self, cls: type[T], stmt: Any, params: dict[str, Any] | None = None) -> T | None:
        row = self.conn.execute(stmt, params).first()
        return from_row(row, cls) if row is not None else None

    def all(self, cls: type[T], stmt: Any, params: dict[str, Any] | None = None) -> list[T]:
        return from_rows(self.conn.execute(stmt, params), cls)

    def prepared_first(self, cls: type[T], stmt: Prepared, params: dict[str, Any]) -> T | None:
        row = stmt.run_first(self.conn, params)
        return from_columns(row, cls) if row is not None else None

    def announce(self, change: Change) -> None:
        """Tell the store's observers of ``change`` once this transaction commits (and, on PostgreSQL, other
        processes listening). Nothing is told if it rolls back."""
        if change in self.changes:
            return
        self.changes.add(change)
        self.dialect.notify(self.conn, change.value)

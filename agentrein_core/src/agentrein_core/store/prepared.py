"""Statements prepared once and run on the database driver itself: the hot path of every recorded call.

SQLAlchemy builds each statement and compiles it, once per database, and its column types convert the values
both ways (their bind and result processors, looked up once). What a :class:`Prepared` statement skips is
SQLAlchemy's per-execution machinery (an execution context, events, a result object, the compiled-cache
lookup), which cost several times the statement itself on SQLite. It runs on the DBAPI connection of the
store's SQLAlchemy connection, inside the transaction SQLAlchemy began, so it commits and rolls back with
everything else. The drivers keep the statements prepared: sqlite3 caches each connection's compiled
statements, psycopg prepares a statement on the server from its fifth execution on a connection.

A driver's error is raised as SQLAlchemy wraps it (``IntegrityError``, ``OperationalError`` …), so the store
tells a conflict, a bad value and an outage apart the same way for every statement.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from attrs import frozen
from sqlalchemy.engine import Connection, Dialect

Processor = Callable[[Any], Any] | None


@frozen
class _Compiled:
    """A statement compiled for one database: its SQL, its parameters and how to convert values."""

    sql: str
    #: Parameter names in the order a positional driver (sqlite3) takes them; None for named ones (psycopg).
    order: tuple[str, ...] | None
    #: Every parameter's value when the caller gives none (the literals the statement was built with).
    defaults: Mapping[str, Any]
    binds: Mapping[str, Processor]
    #: The columns a row answers, each with its result processor.
    columns: tuple[tuple[str, Processor], ...]


class Prepared:
    """``statement`` (an insert, update or select built with named ``bindparam``s), ready to run with
    :meth:`run`. ``columns`` names the columns an insert is given (all of its table's when omitted)."""

    def __init__(self, statement: sa.Insert | sa.Update | sa.Select[Any], columns: Sequence[str] | None = None) -> None:
        self.statement = statement
        self._columns = list(columns) if columns is not None else None
        self._compiled: dict[str, _Compiled] = {}
        self._lock = threading.Lock()

    def run(self, conn: Connection, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Execute with ``params`` in ``conn``'s transaction; the rows it answers, as column dicts."""
        compiled = self._compiled.get(conn.dialect.name) or self._compile(conn.dialect)
        values = {**compiled.defaults, **params}
        for name, process in compiled.binds.items():
            if process is not None:
                values[name] = process(values[name])
        arguments: Any = values if compiled.order is None else tuple(values[n] for n in compiled.order)
        raw = run_on_driver(conn, compiled.sql, arguments)
        columns = compiled.columns
        return [
            {
                name: (value if process is None else process(value))
                for (name, process), value in zip(columns, row, strict=True)
            }
            for row in raw
        ]

    def run_first(self, conn: Connection, params: Mapping[str, Any]) -> dict[str, Any] | None:
        rows = self.run(conn, params)
        return rows[0] if rows else None

    def _compile(self, dialect: Dialect) -> _Compiled:
        with self._lock:
            found = self._compiled.get(dialect.name)
            if found is not None:
                return found
            keys = self._columns
            if keys is None and isinstance(self.statement, sa.Insert):
                keys = [c.key for c in self.statement.table.columns]
            compiled = self.statement.compile(dialect=dialect, column_keys=keys)
            if "POSTCOMPILE" in compiled.string:  # an IN list, rendered per execution: spell it as ORs
                raise ValueError(f"a prepared statement cannot expand lists: {compiled.string}")
            named = {name: bind for bind, name in compiled.bind_names.items()}  # as the SQL names them
            binds = {name: bind.type.dialect_impl(dialect).bind_processor(dialect) for name, bind in named.items()}
            columns = tuple(
                (str(c.key), c.type.dialect_impl(dialect).result_processor(dialect, None))
                for c in self.statement.exported_columns
            )
            order = tuple(compiled.positiontup) if compiled.positional and compiled.positiontup else None
            defaults = {name: bind.effective_value for name, bind in named.items() if not bind.required}
            found = _Compiled(compiled.string, order, defaults, binds, columns)
            self._compiled[dialect.name] = found
            return found


def run_on_driver(conn: Connection, sql: str, arguments: Any = ()) -> Sequence[Any]:
    """Execute ``sql`` on the driver of ``conn``, in its transaction; the rows it answers, as the driver gives
    them. The driver's error is raised as SQLAlchemy wraps it."""
    dbapi = conn.dialect.loaded_dbapi
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    interrupted = False
    try:
        cursor.execute(sql, arguments)
        return cursor.fetchall() if cursor.description is not None else []
    except dbapi.Error as exc:
        raise sa.exc.DBAPIError.instance(sql, arguments, exc, dbapi.Error) from exc
    except BaseException as exc:
        if not isinstance(exc, Exception):
            # Interrupted (Ctrl-C, exit) between sending the query and reading its answer: the driver's connection
            # is mid-command, and its rollback would fail ("another command is already in progress") and hide the
            # interrupt. Never reused, as SQLAlchemy does for the statements it runs itself.
            interrupted = True
            conn.invalidate(exc)
        raise
    finally:
        if not interrupted:  # the invalidated connection is closed: so is its cursor (SQLite would raise, hiding it)
            cursor.close()

"""A Ctrl-C (or any interrupt) landing while the store runs one of its own statements on the driver (the prepared
statements, the group commit's savepoints) reaches the caller as itself: never as the error of a cleanup that the
interrupted connection could no longer do, which an agent's ``except Exception`` would swallow."""

from __future__ import annotations

import _thread
import sqlite3
import threading
from typing import Any, cast

import pytest
import sqlalchemy as sa

from agentrein_core.store.prepared import run_on_driver
from agentrein_core.store.rows import Rows

#: A statement that runs long enough on SQLite for an interrupt to land inside it.
SLOW = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 5000000) SELECT count(*) FROM c"
INTERRUPTED = "SELECT 'interrupted'"


class Cursor(sqlite3.Cursor):
    def execute(self, sql: str, *args: Any) -> Any:
        if sql == INTERRUPTED:
            raise KeyboardInterrupt  # as a Ctrl-C landing between the query's sending and its answer
        return super().execute(sql, *args)


class Connection(sqlite3.Connection):
    def cursor(self, *args: Any, **kwargs: Any) -> Any:
        return super().cursor(Cursor)


def test_a_ctrl_c_during_a_statement_on_sqlite_reaches_the_caller_as_keyboard_interrupt() -> None:
    engine = sa.create_engine("sqlite://")
    threading.Timer(0.05, _thread.interrupt_main).start()  # lands while the statement runs
    with pytest.raises(KeyboardInterrupt), engine.connect() as conn, conn.begin():
        run_on_driver(conn, SLOW)


def test_an_interrupt_inside_a_savepoint_reaches_the_caller_as_itself() -> None:
    engine = sa.create_engine("sqlite://", connect_args={"factory": Connection})
    with (
        pytest.raises(KeyboardInterrupt),
        engine.connect() as conn,
        conn.begin(),
        Rows(conn, cast(Any, None)).savepoint(),
    ):
        run_on_driver(conn, INTERRUPTED)

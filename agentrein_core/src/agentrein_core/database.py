"""Connecting to a database: which URL, which driver, and the SQLite settings AgentRein relies on (WAL, a
busy timeout, foreign keys, writers that take the lock up front); and the Alembic configuration that
migrates it."""

from __future__ import annotations

import json
import logging
import os
import re
import sqlite3
import time
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from agentrein_core.errors import ValidationError

if TYPE_CHECKING:
    from alembic.config import Config
    from sqlalchemy.engine import URL, Connection, Engine
    from sqlalchemy.exc import OperationalError

# SQLAlchemy is imported where a database is reached, not with this module: it takes about a second to import,
# and a command that only says which database it uses (`agentrein mcp proxy` as it starts) needs none of it.

log = logging.getLogger("agentrein")

DEFAULT_DATABASE_URL = "sqlite:///agentrein.db"
DATABASE_URL_ENV = "AGENTREIN_DATABASE_URL"
#: Connections kept per process: a server's request threads and workers share them (a waiting long-poll
#: holds none).
POOL = {"pool_size": 10, "max_overflow": 20, "pool_timeout": 30}
#: Seconds a new PostgreSQL connection may take (unless the URL says ``connect_timeout``): libpq's default is to
#: wait as long as the network does, so a database cut off made each request hang for minutes, not fail as out.
CONNECT_TIMEOUT = 10
#: PostgreSQL compiles a query to machine code (JIT) when its plan costs more than ``jit_above_cost``, which a
#: bounded page can, read through an index with a filter (a list of sessions of one display status): compiling
#: took 25 ms of such a 48 ms list. Every query of AgentRein is a bounded page or lookup, not the long analytical
#: query JIT is for (PostgreSQL's own advice), so it is off unless the URL's ``options`` set ``jit``.
NO_JIT = "-c jit=off"
#: A SQLite file named with no query and nothing quoted: its dialect and path.
_PLAIN_SQLITE_FILE = re.compile(r"(sqlite(?:\+\w+)?):///([^?#%]+)")


def resolve_database_url(url: str | None = None) -> str:
    """The URL to use: the one given, else ``$AGENTREIN_DATABASE_URL``, else ``sqlite:///agentrein.db``.
    A bare ``postgresql://`` URL is taken to mean psycopg 3."""
    url = url or os.environ.get(DATABASE_URL_ENV) or DEFAULT_DATABASE_URL
    if url.startswith(("postgresql://", "postgres://")):
        url = "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def sqlite_file(url: str) -> Path | None:
    """The file a SQLite URL names (``None``: not SQLite, or a database in memory)."""
    import sqlalchemy as sa

    try:
        parsed = sa.engine.make_url(url)
    except sa.exc.ArgumentError:
        return None
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database)


def shown_database_url(url: str) -> str:
    """``url`` as it may be shown to people: its password hidden, and a SQLite file's path made absolute (so
    that the URL shown names the same file from any directory)."""
    plain = _PLAIN_SQLITE_FILE.fullmatch(url)
    if plain is not None and plain[2] != ":memory:":  # as SQLAlchemy would show it, without loading it
        return f"{plain[1]}:///{os.path.abspath(plain[2])}"
    if "@" not in url and not url.startswith("sqlite"):  # no user, so no password to hide
        return url
    import sqlalchemy as sa

    try:
        parsed = sa.engine.make_url(url)
    except sa.exc.ArgumentError:
        return url
    file = sqlite_file(url)
    if file is not None:
        return parsed.set(database=os.path.abspath(file)).render_as_string()
    return parsed.render_as_string(hide_password=True) if parsed.password else url


def create_db_engine(url: str) -> Engine:
    import sqlalchemy as sa

    try:
        parsed = sa.engine.make_url(url)
    except sa.exc.ArgumentError:
        raise ValidationError("database_url", f"{url!r} is not a database URL") from None
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        engine = sa.create_engine(parsed, connect_args={"timeout": 30}, json_deserializer=stored_json, **POOL)
        sa.event.listen(engine, "connect", _sqlite_on_connect)
        sa.event.listen(engine, "begin", _sqlite_on_begin)
        sa.event.listen(engine, "close", _sqlite_on_close)
        return engine
    if backend == "postgresql":
        if parsed.get_driver_name() != "psycopg":  # the store's own statements are written for psycopg 3
            raise ValidationError(
                "database_url", f"unsupported driver {parsed.get_driver_name()!r} (use postgresql+psycopg)"
            )
        engine = sa.create_engine(
            parsed, connect_args=_postgres_settings(parsed), json_deserializer=stored_json, **POOL
        )
        sa.event.listen(engine, "checkout", _ping_if_idle)
        sa.event.listen(engine, "checkin", _note_last_use)
        return engine
    raise ValidationError("database_url", f"unsupported database {backend!r} (use sqlite or postgresql+psycopg)")


def _postgres_settings(url: URL) -> dict[str, Any]:
    """How AgentRein connects to PostgreSQL, unless the URL says otherwise: within :data:`CONNECT_TIMEOUT`, and
    with JIT compilation off (:data:`NO_JIT`), added to whatever ``options`` the URL gives."""
    settings: dict[str, Any] = {}
    if "connect_timeout" not in url.query:
        settings["connect_timeout"] = CONNECT_TIMEOUT
    given = url.query.get("options")
    options = " ".join(given) if isinstance(given, tuple) else given or ""
    if "jit" not in options:
        settings["options"] = f"{options} {NO_JIT}".strip()
    return settings


_decode_json = msgspec.json.Decoder().decode


def stored_json(text: str | bytes) -> Any:
    """A JSON column's value as read (SQLite hands over text, psycopg bytes): decoded by msgspec, several times
    faster than ``json``, which matters where a page reads thousands of records. What msgspec refuses and
    ``json`` reads is read by ``json``, so no stored record becomes unreadable: ``NaN`` and ``Infinity`` and a
    lone surrogate (``json.dumps`` writes all three), a number beyond a float's range (other writers)."""
    try:
        return _decode_json(text)
    except msgspec.DecodeError:
        return json.loads(text)


#: A pooled PostgreSQL connection idle longer than this is pinged before it is handed out (the database may
#: have restarted, or a proxy dropped it); one in steady use is not, which saves a round trip per transaction.
IDLE_BEFORE_PING = 1.0


def _note_last_use(_dbapi_connection: Any, record: Any) -> None:
    record.info["last_use"] = time.monotonic()


def _ping_if_idle(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
    last_use = record.info.get("last_use")
    if last_use is None or time.monotonic() - last_use <= IDLE_BEFORE_PING:
        return  # new, or just used
    try:
        dbapi_connection.execute("SELECT 1")
        dbapi_connection.rollback()
    except Exception as exc:
        import sqlalchemy as sa  # loaded: the pool is SQLAlchemy's

        # The pool discards it and hands out a new connection instead (SQLAlchemy's documented protocol).
        raise sa.exc.DisconnectionError(f"a pooled connection was lost ({exc})") from exc


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    # Let SQLAlchemy, not the sqlite3 module, decide when transactions begin (see _sqlite_on_begin).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA synchronous=NORMAL")
    _switch_to_wal(cursor)
    cursor.close()


#: SQLite's advice for a connection that closes (https://sqlite.org/lang_analyze.html#req): analyse again
#: what this connection's queries found without fresh statistics, reading at most about 400 rows an index, so
#: that the planner keeps choosing the indexes as the tables grow and closing stays quick on a large file.
_ON_CLOSE = ("PRAGMA analysis_limit=400", "PRAGMA optimize")


def _sqlite_on_close(dbapi_connection: Any, _record: Any) -> None:
    # The pool closes each connection (Store.close disposes of it): a connection that cannot follow the advice
    # (the file read-only, locked past the busy timeout) still closes, and says why in the log.
    try:
        for pragma in _ON_CLOSE:
            dbapi_connection.execute(pragma)
    except sqlite3.Error:
        log.warning("PRAGMA optimize failed as a SQLite connection closed", exc_info=True)


def _switch_to_wal(cursor: Any) -> None:
    """WAL mode is kept in the file; switching to it needs a moment alone with the database. SQLite refuses
    at once (no busy wait, to avoid a deadlock) while another connection is creating the schema, so retry."""
    deadline = time.monotonic() + 30
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _sqlite_on_begin(conn: Connection) -> None:
    # On the driver itself: a statement through SQLAlchemy would cost more than the BEGIN. Its error is
    # wrapped as SQLAlchemy wraps the others (a busy database is an OperationalError, an outage).
    begin = "BEGIN IMMEDIATE" if conn.get_execution_options().get("write") else "BEGIN"
    driver: Any = conn.connection.driver_connection
    try:
        driver.execute(begin)
    except sqlite3.Error as exc:
        import sqlalchemy as sa  # loaded: the connection is SQLAlchemy's

        raise sa.exc.DBAPIError.instance(begin, None, exc, sqlite3.Error) from exc


def alembic_config(url: str) -> Config:
    from alembic.config import Config  # imported only to migrate

    config = Config()
    config.set_main_option("script_location", str(files("agentrein_core") / "store" / "migrations"))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


#: SQLite's (primary) result codes that mean the database cannot serve now; its other operational errors
#: (``SQLITE_ERROR``: a statement that failed, a table that is missing) mean the database failed.
_SQLITE_OUTAGES = frozenset(
    {
        sqlite3.SQLITE_BUSY,
        sqlite3.SQLITE_LOCKED,
        sqlite3.SQLITE_NOMEM,
        sqlite3.SQLITE_READONLY,
        sqlite3.SQLITE_INTERRUPT,
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_FULL,
        sqlite3.SQLITE_CANTOPEN,
        sqlite3.SQLITE_PROTOCOL,
    }
)


def is_outage(exc: OperationalError) -> bool:
    """Whether an operational error is an outage (``failure_mode`` decides what a call does then) rather than a
    failure. PostgreSQL's operational errors are all outages (connection, resources, shutdown, conflicts);
    SQLite says which by its result code."""
    code = getattr(exc.orig, "sqlite_errorcode", None)
    return code is None or code & 0xFF in _SQLITE_OUTAGES


#: PostgreSQL's words for a transaction that lost to a concurrent one (a deadlock, a serialization failure, a row
#: lock not had in the time allowed): the same work succeeds when tried again.
_LOST_TO_ANOTHER = frozenset({"40P01", "40001", "55P03"})


def lost_to_another_transaction(exc: BaseException) -> bool:
    """Whether ``exc`` was caused by the database ending a statement that lost to a concurrent transaction (or
    gave way to one: :data:`~agentrein_core.store.dialect.GROUP_LOCK_WAIT`)."""
    seen: BaseException | None = exc
    while seen is not None:
        if getattr(getattr(seen, "orig", None), "sqlstate", None) in _LOST_TO_ANOTHER:
            return True
        seen = seen.__cause__
    return False

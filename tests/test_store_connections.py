"""How the store holds its database connections: SQLite writers share one connection, kept open, that a failed
write does not pass on; a PostgreSQL connection lost while idle in the pool is replaced before use."""

from __future__ import annotations

import os
import socket
import sqlite3
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest

from agentrein import AgentRein
from agentrein_core import database
from agentrein_core.clock import utcnow
from agentrein_core.errors import AgentReinUnavailableError, InvalidTransitionError
from agentrein_core.ids import new_id
from agentrein_core.model import Organisation
from agentrein_core.statuses import Plan
from agentrein_core.store import Store


def add_organisation(store: Store, org_id: str | None = None) -> str:
    org_id = org_id or new_id("org")
    with store.transaction() as tx:
        tx.insert(Organisation(org_id, f"org {org_id}", Plan.TEAM, utcnow()))
    return org_id


def organisations(store: Store) -> set[str]:
    with store.transaction(write=False) as tx:
        return {org.org_id for org in tx.organisations.all()}


def test_a_write_after_a_failed_write_is_committed(tmp_path: os.PathLike[str]) -> None:
    store = Store(f"sqlite:///{tmp_path}/a.db")
    first = add_organisation(store)
    with pytest.raises(InvalidTransitionError):
        add_organisation(store, first)  # the same id again: the write fails, and its connection is let go
    second = add_organisation(store)
    assert organisations(store) == {first, second}
    store.close()


@pytest.mark.parametrize(
    "url",
    ["sqlite:///agentrein.db", "sqlite+pysqlite:///../up.db", "sqlite:///a%20b.db", "postgresql+psycopg://u:pw@h/db"],
)
def test_a_database_url_is_shown_as_sqlalchemy_reads_it_whether_or_not_it_is_parsed(url: str) -> None:
    """The plain SQLite files and the URLs with no password are shown without loading SQLAlchemy."""
    import sqlalchemy as sa

    parsed = sa.engine.make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database:
        parsed = parsed.set(database=os.path.abspath(parsed.database))
    assert database.shown_database_url(url) == parsed.render_as_string(hide_password=True)


def test_a_postgres_connection_lost_while_idle_is_replaced_before_it_is_used(
    own_postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(database, "IDLE_BEFORE_PING", 0.0)
    store = Store(own_postgres_url)
    add_organisation(store)  # a connection is in the pool now
    dsn = own_postgres_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(dsn, autocommit=True) as admin:
        ended = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid()"
        ).fetchall()
    assert ended  # the pooled connection's server process is gone
    org_id = add_organisation(store)
    assert org_id in organisations(store)
    store.close()


def test_a_postgresql_database_that_never_answers_is_an_outage_after_the_connect_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A socket that takes the connection and says nothing, as a database behind a cut-off network seems to libpq:
    # without a timeout of its own, libpq waits for its answer for ever (this test would hang).
    monkeypatch.setattr(database, "CONNECT_TIMEOUT", 1)
    with socket.create_server(("127.0.0.1", 0)) as silent:
        store = Store(f"postgresql+psycopg://agentrein:agentrein@127.0.0.1:{silent.getsockname()[1]}/x", migrate=False)
        with pytest.raises(AgentReinUnavailableError, match="the AgentRein database is unavailable"):
            store.schema_version()
        store.close()


@pytest.mark.parametrize(
    ("options", "expected"),
    [(None, {"jit": "off"}), ("-c statement_timeout=5000", {"jit": "off", "statement_timeout": "5s"})],
    ids=["no options", "options of the URL's own"],
)
def test_postgresql_connections_compile_no_query_unless_the_url_says_so(
    own_postgres_url: str, options: str | None, expected: dict[str, str]
) -> None:
    # A bounded page whose plan was costed high spent half its time compiling itself (JIT).
    url = own_postgres_url + (f"?options={quote(options)}" if options else "")
    store = Store(url)
    with store.transaction(write=False) as tx:
        shown = {name: tx.conn.exec_driver_sql(f"SHOW {name}").scalar() for name in expected}
    assert shown == expected
    store.close()
    asked = Store(own_postgres_url + "?options=" + quote("-c jit=on"))
    with asked.transaction(write=False) as tx:
        assert tx.conn.exec_driver_sql("SHOW jit").scalar() == "on"
    asked.close()


def test_a_sqlite_store_that_closes_leaves_fresh_statistics_for_the_tables_it_queried(tmp_path: Path) -> None:
    """SQLite's advice, ``PRAGMA optimize`` as a connection closes: listing sessions lets the planner choose
    between the sessions' indexes, which were never analysed, so closing analyses them (``sqlite_stat1``), and
    the next process's planner reads the statistics. Whichever of the pool's connections closes first (migration
    0016 keeps the first analysis from changing the schema under the others)."""
    client = AgentRein(f"sqlite:///{tmp_path}/a.db", organisation="stats", journal_path=tmp_path / "journal.db")
    for n in range(40):
        client.new_session(f"agent-{n % 4}")
    assert len(client.list_sessions(limit=10)) == 10
    client.close()
    with sqlite3.connect(tmp_path / "a.db") as conn:
        analysed = {table for (table,) in conn.execute("SELECT tbl FROM sqlite_stat1")}
    assert "sessions" in analysed

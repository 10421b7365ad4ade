"""Alembic owns the schema: migrations build exactly the tables the code expects, and can be undone."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.schema import CreateIndex
from test_engine import run_actions

from agentrein_core.database import alembic_config
from agentrein_core.engine import Engine
from agentrein_core.engine.consequences import queue_check
from agentrein_core.statuses import Plan
from agentrein_core.store import Store
from agentrein_core.store.migrations import HEAD
from agentrein_core.store.schema import metadata


def test_migrations_produce_the_schema_the_code_declares(database_url: str) -> None:
    store = Store(database_url)
    with store.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), metadata)
    store.close()
    assert diff == []


def test_migrations_downgrade_to_nothing_and_upgrade_again(database_url: str) -> None:
    store = Store(database_url)
    config = alembic_config(store.url)
    command.downgrade(config, "base")
    assert set(sa.inspect(store.engine).get_table_names()) <= {"alembic_version"}
    store.upgrade()
    assert {"sessions", "actions", "approvals", "policies", "rollbacks"} <= set(
        sa.inspect(store.engine).get_table_names()
    )
    store.close()


def test_a_downgrade_below_the_intent_check_watermark_queues_the_checks_calls_want(database_url: str) -> None:
    store = Store(database_url)
    engine = Engine(store)
    org = engine.accounts.create_organisation(f"o-{uuid.uuid4().hex[:8]}", Plan.TEAM)
    session_id = engine.recording.new_session(org.org_id, "agent", "intent").session_id
    queued_by_a_round, still_wanted = (a.action_id for a in run_actions(engine, org.org_id, session_id, 2))
    with store.transaction() as tx:
        tx.actions.checks_queued([queued_by_a_round])
        queue_check(tx, datetime.now(UTC), org.org_id, session_id, queued_by_a_round)
    command.downgrade(alembic_config(store.url), "0014")
    with store.engine.connect() as conn:
        rows = conn.execute(
            sa.text("SELECT action_id, due_at FROM verifications WHERE session_id = :s"), {"s": session_id}
        )
        checks = sorted((action_id, due is not None) for action_id, due in rows)
    store.upgrade()
    store.close()
    assert checks == sorted([(queued_by_a_round, True), (still_wanted, True)])  # each call's, once


def test_a_database_holding_records_migrates_down_to_the_first_revision_and_up_again_keeping_them(
    database_url: str,
) -> None:
    store = Store(database_url)
    engine = Engine(store)
    org = engine.accounts.create_organisation(f"o-{uuid.uuid4().hex[:8]}", Plan.TEAM)
    session_id = engine.recording.new_session(org.org_id, "agent", "intent").session_id
    done = [a.action_id for a in run_actions(engine, org.org_id, session_id, 2)]
    command.downgrade(alembic_config(store.url), "0001")  # SQLite rebuilds tables that rows point at, both ways
    store.upgrade()
    kept = [a.action_id for a in engine.recording.get_session(org.org_id, session_id).actions]
    store.close()
    assert kept == done


def test_opening_a_store_twice_is_harmless(database_url: str) -> None:
    Store(database_url).close()
    Store(database_url).close()


def test_the_schema_head_the_store_checks_for_is_alembics_newest_revision(database_url: str) -> None:
    """A store that opens a database at HEAD runs no migrator; HEAD must therefore be the newest revision."""
    store = Store(database_url)
    assert ScriptDirectory.from_config(alembic_config(store.url)).get_current_head() == HEAD
    assert store.schema_version() == HEAD
    store.close()


def test_a_store_opened_on_an_empty_database_migrates_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    unmigrated = Store(url, migrate=False)
    assert unmigrated.schema_version() is None
    unmigrated.close()
    migrated = Store(url)
    assert migrated.schema_version() == HEAD
    migrated.close()


def partial_indexes(dialect: str) -> list[sa.Index]:
    """The indexes ``schema.py`` declares with a predicate for ``dialect``."""
    return [
        index
        for table in metadata.tables.values()
        for index in table.indexes
        if index.dialect_options[dialect]["where"] is not None
    ]


# Alembic compares no index predicate: these two tests hold the migrated ones to the declared ones.


def test_the_migrated_partial_indexes_have_the_predicates_the_code_declares_on_sqlite(tmp_path: Path) -> None:
    # SQLite keeps each index's statement as it was given.
    store = Store(f"sqlite:///{tmp_path / 'agentrein.db'}")
    declared = {
        index.name: str(CreateIndex(index).compile(dialect=store.engine.dialect)).strip()
        for index in partial_indexes("sqlite")
    }
    with store.engine.connect() as conn:
        names = ", ".join(f"'{name}'" for name in declared)
        migrated: dict[str, str] = dict(
            conn.exec_driver_sql(f"SELECT name, sql FROM sqlite_master WHERE name IN ({names})").all()
        )
    store.close()
    assert declared and migrated == declared


def test_the_migrated_partial_indexes_have_the_predicates_the_code_declares_on_postgresql(postgres_url: str) -> None:
    # PostgreSQL rewrites a predicate as it stores it: each declared index is made too, under another name, in a
    # transaction that is then rolled back, and the two predicates PostgreSQL keeps are compared.
    store = Store(postgres_url)
    declared = partial_indexes("postgresql")
    predicate = "SELECT pg_get_expr(indpred, indrelid) FROM pg_index WHERE indexrelid = CAST(%(name)s AS regclass)"
    with store.engine.connect() as conn, conn.begin():
        for index in declared:
            statement = str(CreateIndex(index).compile(dialect=store.engine.dialect))
            conn.exec_driver_sql(statement.replace(f"INDEX {index.name} ON", f"INDEX check_{index.name} ON", 1))
            migrated = conn.exec_driver_sql(predicate, {"name": index.name}).scalar_one()
            expected = conn.exec_driver_sql(predicate, {"name": f"check_{index.name}"}).scalar_one()
            assert migrated == expected, index.name
        conn.rollback()
    store.close()
    assert declared

"""Alembic owns the schema: migrations build exactly the tables the code expects, and can be undone."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from agentrein_core.schema import metadata
from agentrein_core.store import Store, alembic_config


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


def test_opening_a_store_twice_is_harmless(database_url: str) -> None:
    Store(database_url).close()
    Store(database_url).close()

"""The supervisor's reads that run every round find their rows from an index: a plan that scans the sessions table
would read every session, once a round, to find the few it wants."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from agentrein_core.store import Store


def plan_of_the_statement_run_by(store: Store, read: Any) -> str:
    """The database's plan for the statement ``read`` runs (the one naming ``check_due``), with sequential scans
    priced out on PostgreSQL, so that the index is chosen whenever it can be used (the table is empty here)."""
    executed: list[tuple[str, Any]] = []

    def seen(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        executed.append((statement, parameters))

    sa.event.listen(store.engine, "before_cursor_execute", seen)
    try:
        with store.transaction(write=False) as tx:
            read(tx)
    finally:
        sa.event.remove(store.engine, "before_cursor_execute", seen)
    (statement, parameters), *_ = [(s, p) for s, p in executed if "check_due" in s]
    with store.engine.connect() as conn:
        if store.dialect == "sqlite":
            rows = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters).all()
            return "\n".join(str(row[-1]) for row in rows)
        conn.exec_driver_sql("SET enable_seqscan = off")
        return "\n".join(str(row[0]) for row in conn.exec_driver_sql(f"EXPLAIN {statement}", parameters).all())


@pytest.mark.parametrize("org_id", ["org_one", None], ids=["of one organisation", "of every organisation"])
def test_the_sessions_whose_intent_checks_are_due_are_found_from_their_index(
    database_url: str, org_id: str | None
) -> None:
    store = Store(database_url)
    try:
        plan = plan_of_the_statement_run_by(store, lambda tx: tx.sessions.checks_due(org_id, 100))
    finally:
        store.close()
    assert "ix_sessions_check_due" in plan, plan

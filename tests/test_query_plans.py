"""Reads that run often find their rows from an index: the supervisor's, every round (a plan that scans the sessions
table would read every session, once a round, to find the few it wants), and a rollback's, at every step."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from agentrein_core.store import Store


def plan_of_the_statement_run_by(store: Store, read: Any, naming: str = "check_due") -> str:
    """The database's plan for the statement ``read`` runs (the one naming ``naming``), with sequential scans
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
    (statement, parameters), *_ = [(s, p) for s, p in executed if naming in s]
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


def test_the_head_of_a_rollbacks_chain_is_found_by_probes_of_an_index_not_by_reading_down_the_session(
    database_url: str,
) -> None:
    # Read down the seq index, each step of a rollback passed over every action undone before it.
    store = Store(database_url)
    try:
        plan = plan_of_the_statement_run_by(store, lambda tx: tx.actions.next_to_undo("ses_x", False), "max(")
    finally:
        store.close()
    # for each (SUCCESS, ROLLBACK_FAILED) x every undo status but SKIPPED, the part of the index that holds them,
    # read from its highest seq and stopped at the first
    if store.dialect == "sqlite":
        index = "ix_actions_session_status (session_id=? AND status=? AND undo_status>? AND undo_status<?)"
        assert plan.count(f"SEARCH actions USING COVERING INDEX {index}") == 12, plan
    else:
        assert plan.count("Limit") == 12, plan
        assert plan.count("Index Only Scan Backward using ix_actions_session_status") == 12, plan
    walks = ("Seq Scan", "TEMP B-TREE", "Backward using ux_actions_session_seq")
    assert not any(walk in plan for walk in walks), plan

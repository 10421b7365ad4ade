"""A reviewer's card reads a session's actions as tallies (``decisions.Tally``): the latest few a rollback would
deal with and how many there are. The store counts them in SQL (``Actions.tallies``) from the same picks
(``rollback.Pick``) that ``decisions.tallied`` counts in Python over every action: both must agree, on both
databases, whatever the session holds."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agentrein_core import decisions, rollback
from agentrein_core.engine import Engine
from agentrein_core.model import Action, UndoConfig
from agentrein_core.statuses import ActionStatus, OperationType, Plan, UndoStatus
from agentrein_core.store import Store

PICKS = [
    decisions.DONE,
    decisions.MARKABLE,
    rollback.PLANNED,
    rollback.PLANNED_ASKED,
    rollback.WALKED,
    rollback.WALKED_ASKED,
]
NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
UNDOS = [None, UndoConfig("none"), UndoConfig("http-delete", {"url": "https://api.example.com/v1/things/1"})]


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    engine = Engine(Store(database_url))
    yield engine
    engine.store.close()


an_action = st.tuples(
    st.sampled_from(list(ActionStatus)), st.sampled_from(list(UndoStatus)), st.booleans(), st.sampled_from(UNDOS)
)


def stored_session(
    engine: Engine, made: list[tuple[ActionStatus, UndoStatus, bool, UndoConfig | None]]
) -> tuple[str, list[Action]]:
    """A new session, holding an action of each of ``made`` (status, undo status, undo asked, inverse), seq 1 on."""
    org = engine.accounts.create_organisation(f"t-{uuid.uuid4().hex[:8]}", Plan.TEAM)
    session_id = engine.recording.new_session(org.org_id, "agent", "intent").session_id
    actions = [
        Action(
            f"act_{uuid.uuid4().hex}",
            session_id,
            org.org_id,
            seq,
            "http",
            f"POST /v1/things#{seq}",
            OperationType.CREATE,
            {},
            status,
            f"key-{uuid.uuid4().hex}",
            NOW,
            NOW,
            undo=undo,
            undo_status=undo_status,
            undo_requested=asked,
        )
        for seq, (status, undo_status, asked, undo) in enumerate(made, start=1)
    ]
    with engine.store.transaction() as tx:
        for action in actions:
            tx.insert(action)
    return session_id, actions


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(an_action, max_size=45))
@example([(ActionStatus.SUCCESS, UndoStatus.NONE, False, UNDOS[2])] * 30)  # more than a card lists: ranked
def test_the_store_tallies_a_sessions_actions_as_decisions_tallies_them(
    engine: Engine, made: list[tuple[ActionStatus, UndoStatus, bool, UndoConfig | None]]
) -> None:
    session_id, actions = stored_session(engine, made)
    counted_in_python = decisions.tallied(actions)
    with engine.store.transaction(write=False) as tx:
        counted_in_sql = {pick: tx.actions.tallies([session_id], pick) for pick in PICKS}
        counted_only = {pick: tx.actions.tallies([session_id], pick, 0) for pick in PICKS}
    for pick in PICKS:
        expected = counted_in_python(pick)
        found = counted_in_sql[pick].get(session_id, decisions.Tally())
        assert found.latest == expected.latest, pick  # the same actions, read whole, as they were written
        counts = (expected.count, expected.without_inverse, expected.undone, expected.through)
        assert (found.count, found.without_inverse, found.undone, found.through) == counts, pick
        only = counted_only[pick].get(session_id, decisions.Tally())
        assert (only.latest, only.count, only.without_inverse, only.undone, only.through) == ([], *counts), pick


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(an_action, max_size=30), st.booleans())
def test_the_store_finds_the_head_of_a_rollbacks_chain_where_the_chain_in_python_begins(
    engine: Engine, made: list[tuple[ActionStatus, UndoStatus, bool, UndoConfig | None]], only_requested: bool
) -> None:
    # The store reads the head by index probes, one per pair of statuses: whatever pairs the session holds.
    session_id, actions = stored_session(engine, made)
    with engine.store.transaction(write=False) as tx:
        head = tx.actions.next_to_undo(session_id, only_requested)
    assert head == rollback.planned(actions, only_requested=only_requested)[:1]

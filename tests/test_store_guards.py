"""The store's compare-and-set writes (``tx.replace``, ``tx.rollbacks.update``): a write lands only while the row
still holds what the writer read, so of two writers racing from one reading exactly one wins. Each shape of
guard is a statement prepared once, so these pin what the prepared statements do, on both databases."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from attrs import evolve

from agentrein_core.engine import Engine
from agentrein_core.ids import new_id
from agentrein_core.model import Rollback, Session
from agentrein_core.statuses import RollbackStatus, SessionStatus
from agentrein_core.store import Store

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def store(database_url: str) -> Store:
    return Store(database_url)


@pytest.fixture
def session(store: Store) -> Session:
    engine = Engine(store)
    org = engine.accounts.create_organisation(new_id("guards"))  # the PostgreSQL database is shared by the tests
    return engine.recording.new_session(org.org_id, agent_id="guards", intent="pin the guards")


def stored(store: Store, session: Session) -> Session:
    with store.transaction(write=False) as tx:
        found = tx.sessions.get(session.org_id, session.session_id)
    assert found is not None
    return found


def test_a_replace_lands_while_the_row_still_holds_the_expected_values(store: Store, session: Session) -> None:
    with store.transaction() as tx:
        wrote = tx.replace(evolve(session, status=SessionStatus.COMPLETED), status=SessionStatus.ACTIVE)
    assert wrote is True
    assert stored(store, session).status is SessionStatus.COMPLETED


def test_of_two_replaces_from_one_reading_only_the_first_lands(store: Store, session: Session) -> None:
    with store.transaction() as tx:
        assert tx.replace(evolve(session, status=SessionStatus.COMPLETED), status=SessionStatus.ACTIVE)
    with store.transaction() as tx:
        late = tx.replace(evolve(session, status=SessionStatus.ABANDONED), status=SessionStatus.ACTIVE)
    assert late is False
    assert stored(store, session).status is SessionStatus.COMPLETED


def test_a_replace_guarded_by_a_time_compares_the_time_as_stored(store: Store, session: Session) -> None:
    with store.transaction() as tx:
        stale = tx.replace(
            evolve(session, status=SessionStatus.ABANDONED),
            last_activity_at=session.last_activity_at - timedelta(seconds=1),
        )
        fresh = tx.replace(evolve(session, status=SessionStatus.ABANDONED), last_activity_at=session.last_activity_at)
    assert (stale, fresh) == (False, True)


def rollback_of(store: Store, session: Session, lease_token: str | None) -> Rollback:
    job = Rollback(
        rollback_id=new_id("rbk"),
        org_id=session.org_id,
        session_id=session.session_id,
        status=RollbackStatus.RUNNING,
        trigger="pinning the guards",
        requested_by="test",
        created_at=NOW,
        lease_token=lease_token,
    )
    with store.transaction() as tx:
        tx.insert(job)
    return job


def test_a_rollback_expected_unleased_is_claimed_only_while_nobody_holds_it(store: Store, session: Session) -> None:
    job = rollback_of(store, session, lease_token=None)
    with store.transaction() as tx:
        first = tx.rollbacks.update(job.rollback_id, {"lease_token": "first"}, lease_token=None)
        second = tx.rollbacks.update(job.rollback_id, {"lease_token": "second"}, lease_token=None)
    assert first is not None and first.lease_token == "first"
    assert second is None


def test_a_rollback_expected_held_by_a_token_is_written_only_by_that_token(store: Store, session: Session) -> None:
    job = rollback_of(store, session, lease_token="mine")
    until = NOW + timedelta(minutes=1)
    with store.transaction() as tx:
        theirs = tx.rollbacks.update(job.rollback_id, {"lease_until": until}, lease_token="theirs")
        unleased = tx.rollbacks.update(job.rollback_id, {"lease_until": until}, lease_token=None)
        mine = tx.rollbacks.update(job.rollback_id, {"lease_until": until}, lease_token="mine")
    assert (theirs, unleased) == (None, None)
    assert mine is not None and mine.lease_until == until and mine.status is RollbackStatus.RUNNING


def test_a_rollback_written_with_a_column_it_does_not_have_is_refused(store: Store, session: Session) -> None:
    job = rollback_of(store, session, lease_token=None)
    with store.transaction() as tx, pytest.raises(ValueError, match="leese_token"):
        tx.rollbacks.update(job.rollback_id, {"leese_token": "mine"}, lease_token=None)

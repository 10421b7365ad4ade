"""What ``store/dialect.py`` does differently on each database keeps one meaning on both: an upsert inserts a
record, then writes over the row with its key; due work is claimed by one claimer at a time; and only
PostgreSQL carries a change committed in one process to the observers of another."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agentrein_core.engine import Engine
from agentrein_core.ids import new_id
from agentrein_core.model import ConnectorConfig, Organisation, OrganisationSettings, Verification
from agentrein_core.statuses import DriftResponse
from agentrein_core.store import Change, Store

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def store(database_url: str) -> Store:
    return Store(database_url)


@pytest.fixture
def org(store: Store) -> Organisation:
    return Engine(store).accounts.create_organisation(
        new_id("dialect")
    )  # the PostgreSQL database is shared by the tests


def test_an_upsert_inserts_a_record_and_then_writes_over_the_row_with_its_key(store: Store, org: Organisation) -> None:
    first = ConnectorConfig(org.org_id, "http", enabled=True, config={"allowedHosts": ["a.example"]}, updated_at=NOW)
    later = ConnectorConfig(org.org_id, "http", enabled=False, config={}, updated_at=NOW + timedelta(minutes=1))
    other = ConnectorConfig(org.org_id, "stripe", enabled=True, config={}, updated_at=NOW)
    with store.transaction() as tx:
        tx.upsert(first)
        tx.upsert(other)
    with store.transaction() as tx:
        tx.upsert(later)
    with store.transaction(write=False) as tx:
        assert tx.connector_configs.of_org(org.org_id) == [later, other]


def test_an_upsert_of_an_organisations_settings_keeps_one_row(store: Store, org: Organisation) -> None:
    with store.transaction() as tx:
        tx.upsert(OrganisationSettings(org.org_id, on_drift=DriftResponse.REVIEW))
        tx.upsert(OrganisationSettings(org.org_id, on_drift=DriftResponse.ROLLBACK, webhook_hosts=["h.example"]))
    with store.transaction(write=False) as tx:
        stored = tx.settings.get(org.org_id)
    assert stored == OrganisationSettings(org.org_id, on_drift=DriftResponse.ROLLBACK, webhook_hosts=["h.example"])


def test_due_work_is_claimed_once_and_comes_due_again_when_the_lease_runs_out(store: Store, org: Organisation) -> None:
    engine = Engine(store)
    session = engine.recording.new_session(org.org_id, agent_id="dialect", intent="claim a check")
    check = Verification(new_id("ver"), org.org_id, session.session_id, None, created_at=NOW, due_at=NOW)
    with store.transaction() as tx:
        tx.insert(check)
    lease = NOW + timedelta(minutes=5)
    with store.transaction() as tx:
        claimed = tx.verifications.claim_due(NOW, lease, org.org_id)
    with store.transaction() as tx:
        again = tx.verifications.claim_due(NOW + timedelta(minutes=1), lease, org.org_id)
    with store.transaction() as tx:
        after_lease = tx.verifications.claim_due(lease, lease + timedelta(minutes=5), org.org_id)
    assert claimed is not None and claimed.verification_id == check.verification_id and claimed.due_at == lease
    assert again is None
    assert after_lease is not None and after_lease.verification_id == check.verification_id


def test_a_change_committed_through_one_postgresql_store_reaches_the_observers_of_another(postgres_url: str) -> None:
    listener, writer = Store(postgres_url), Store(postgres_url)
    heard = threading.Event()
    listener.observe(lambda changes: heard.set() if Change.DECISION in changes else None)
    stop = threading.Event()
    listening = threading.Thread(target=listener.listen, args=(stop,))
    listening.start()
    try:
        for _ in range(600):  # announced again until the listener is up: a NOTIFY sent before LISTEN reaches nobody
            with writer.transaction() as tx:
                tx.announce(Change.DECISION)
            if heard.wait(0.05):
                break
    finally:
        stop.set()
        listening.join()
    assert heard.is_set()
    assert not listener.listening


def test_a_sqlite_store_refuses_to_listen_for_other_processes_changes(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'agentrein.db'}")
    with pytest.raises(TypeError, match="only PostgreSQL"):
        store.listen(threading.Event())

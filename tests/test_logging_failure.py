"""When action logging fails, the session is rolled back (the core concepts' rollback triggers): a call whose
write-ahead record AgentRein refuses or fails to write never runs, the session's earlier work is undone, and
the agent gets the recording error with the rollback's outcome attached, embedded and through a server, on
both databases. (AgentRein out of reach in ``failure_mode="closed"``: test_journal.py, test_failure_mode.py.)"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
from serving import RunningServer

import agentrein_http
from agentrein import (
    ActionStatus,
    AgentRein,
    AgentReinError,
    DisplayStatus,
    RollbackFailedError,
    SessionStatus,
    ValidationError,
)
from agentrein_core import rules
from agentrein_core.database import create_db_engine, resolve_database_url
from agentrein_core.plugins import Connectors, new_plugin_manager
from agentrein_testing import FakeService


def start(ar: AgentRein, service: FakeService) -> tuple[httpx.Client, str]:
    """A session whose first call created an order (recorded, undoable); its client and id."""
    session = ar.new_session(agent_id="billing", intent="orders")
    client = ar.wrap(httpx.Client(base_url=service.base_url), session, connector="http")
    client.post("/v1/orders", json={"n": 1})
    return client, session.id


@pytest.fixture
def records_url(ar: AgentRein, request: pytest.FixtureRequest) -> str:
    """The database the records of ``ar`` go to: its own embedded, the server's through one."""
    if ar.database_url is not None:
        return ar.database_url
    server: RunningServer = request.getfixturevalue("server")
    return server.engine.store.url


@contextmanager
def store_fails(database_url: str, write: str, condition: str) -> Iterator[None]:
    """The database fails a ``write`` (``INSERT``, ``UPDATE``) of an action whose row meets ``condition`` (SQL
    over ``NEW``): a trigger raises an error of the database's own (PostgreSQL: an exception raised in
    PL/pgSQL; SQLite: an SQL function that fails)."""
    engine = create_db_engine(resolve_database_url(database_url))
    name = f"fail_{uuid.uuid4().hex[:12]}"
    if engine.dialect.name == "postgresql":
        create = [
            f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS "
            f"$$ BEGIN RAISE EXCEPTION 'the store failed'; END $$",
            f"CREATE TRIGGER {name} BEFORE {write} ON actions FOR EACH ROW WHEN ({condition}) "
            f"EXECUTE FUNCTION {name}()",
        ]
        drop = [f"DROP TRIGGER {name} ON actions", f"DROP FUNCTION {name}()"]
    else:
        create = [f"CREATE TRIGGER {name} BEFORE {write} ON actions WHEN {condition} BEGIN SELECT json('failed'); END"]
        drop = [f"DROP TRIGGER {name}"]
    with engine.begin() as conn:
        for statement in create:
            conn.execute(sa.text(statement))
    try:
        yield
    finally:
        with engine.begin() as conn:
            for statement in drop:
                conn.execute(sa.text(statement))
        engine.dispose()


def test_a_write_ahead_record_agentrein_refuses_rolls_the_session_back_and_the_call_never_runs(
    ar: AgentRein, service: FakeService
) -> None:
    client, session_id = start(ar, service)
    with pytest.raises(ValidationError, match="api_name"):
        client.post("/v1/" + "x" * 600, json={})  # its api name is over the limit of a record
    assert [r.path for r in service.calls("POST")] == ["/v1/orders"]
    assert service.collection("orders") == {}
    session = ar.get_session(session_id)
    assert session.display_status is DisplayStatus.REVERTED
    assert [a.status for a in session.actions] == [ActionStatus.ROLLED_BACK]


def test_a_write_ahead_record_the_store_fails_to_write_rolls_the_session_back_and_the_call_never_runs(
    ar: AgentRein, service: FakeService, records_url: str
) -> None:
    client, session_id = start(ar, service)
    refused = store_fails(records_url, "INSERT", "NEW.api_name = 'POST /v1/refused'")
    with refused, pytest.raises(AgentReinError, match="failed"):
        client.post("/v1/refused", json={})  # failure_mode="open": a store that fails is no outage
    assert [r.path for r in service.calls("POST")] == ["/v1/orders"]
    assert service.collection("orders") == {}
    assert ar.get_session(session_id).display_status is DisplayStatus.REVERTED


def test_when_the_rollback_after_a_refused_record_fails_too_the_recording_error_says_so(
    ar: AgentRein, service: FakeService
) -> None:
    client, session_id = start(ar, service)
    service.fail_next("DELETE", "/v1/orders/*", status=500)  # the undo of the first call will fail
    with pytest.raises(ValidationError) as raised:
        client.post("/v1/" + "x" * 600, json={})
    failure = getattr(raised.value, "agentrein_rollback_failure", None)
    assert isinstance(failure, RollbackFailedError)
    assert failure.action.status is ActionStatus.ROLLBACK_FAILED and failure.action.seq == 1
    assert any("rolled the session back, and that failed too" in note for note in raised.value.__notes__)
    assert ar.get_session(session_id).display_status is DisplayStatus.ROLLBACK_FAILED


def test_a_failed_call_whose_failure_the_store_fails_to_record_still_rolls_the_session_back(
    ar: AgentRein, service: FakeService, records_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The failed call's record stays CLEARED (its failure could not be stored), so the rollback first waits
    # its while for that call's outcome, as for a call under way (rules.CONFIRMATION_AWAITED, shortened here).
    monkeypatch.setattr(rules, "CONFIRMATION_AWAITED", timedelta(seconds=1))
    client, session_id = start(ar, service)
    service.fail_next("POST", "/v1/things", status=400)
    failure_refused = store_fails(records_url, "UPDATE", "NEW.status = 'FAILED'")
    with failure_refused, pytest.raises(httpx.HTTPStatusError):
        client.post("/v1/things", json={})
    session = ar.get_session(session_id)
    assert session.display_status is DisplayStatus.REVERTED
    assert service.collection("orders") == {}


def test_a_record_of_a_connector_the_server_lacks_is_refused_and_rolls_the_session_back(
    tmp_path: Path, service: FakeService
) -> None:
    from agentrein_todo import TodoClient  # the example plugin: installed here, not in this server

    pm = new_plugin_manager(load_entry_points=False)
    pm.register(agentrein_http, "http")
    server = RunningServer(f"sqlite:///{tmp_path / 'http-only.db'}", connectors=Connectors(pm))
    try:
        ar = server.tenant().client()
        _, session_id = start(ar, service)
        todo = TodoClient()
        todo_client = ar.wrap(todo, session_id, connector="todo")
        with pytest.raises(ValidationError, match="no connector named 'todo' is installed"):
            todo_client.add_item("never made")
        assert todo.requests == [] and todo.items == {}
        session = ar.get_session(session_id)
        assert (session.status, session.display_status) == (SessionStatus.ROLLED_BACK, DisplayStatus.REVERTED)
        assert service.collection("orders") == {}
        ar.close()
    finally:
        server.stop()

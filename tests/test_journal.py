"""``failure_mode="open"`` through a server that goes away and comes back: the calls made meanwhile run,
are journaled locally, and are replayed in order once the server answers, each recorded exactly once."""

from __future__ import annotations

import sqlite3
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
from relay import Relay
from serving import RunningServer, Tenant

from agentrein import (
    ActionStatus,
    AgentRein,
    AgentReinUnavailableError,
    DisplayStatus,
    NotFoundError,
    SessionInfo,
    SessionStatus,
    _outbox,
)
from agentrein._outbox import Outbox
from agentrein._outbox_file import CallRecorded, Entry, SessionCompleted, journal_file
from agentrein._port import Recorder
from agentrein_core.clock import utcnow
from agentrein_core.commands import ExecutedCall
from agentrein_core.statuses import OperationType
from agentrein_testing import FakeService


class Unreachable:
    """The recorder of a server that cannot be reached: an outbox's entries stay where they are."""

    def __getattr__(self, name: str) -> Any:
        def refuse(*args: Any, **kwargs: Any) -> None:
            raise AgentReinUnavailableError("the server of another test, never reached")

        return refuse


AWAY = cast(Recorder, Unreachable())


def journaled(outbox: Outbox, entry: Entry) -> None:
    """``entry`` written in ``outbox`` by a process that then ends (it cannot send it: AWAY)."""
    with closing(outbox):
        outbox.append(entry)


@pytest.fixture
def tenant(server: RunningServer) -> Tenant:
    return server.tenant()


@pytest.fixture
def relay(server: RunningServer) -> Iterator[Relay]:
    """The agents' way to the server, which the test can interrupt."""
    relay = Relay.to_server(server.url)
    yield relay
    relay.cut()


@pytest.fixture
def agent(tenant: Tenant, relay: Relay) -> Iterator[AgentRein]:
    with AgentRein(base_url=relay.url(), api_key=tenant.key) as ar:
        yield ar


def opened_while_the_server_is_away(
    agent: AgentRein, relay: Relay, service: FakeService
) -> tuple[SessionInfo, httpx.Client]:
    """The server goes away; a session opened meanwhile (warned about), and a client wrapped in it."""
    relay.pause()
    with pytest.warns(RuntimeWarning, match="unavailable"):
        session = agent.new_session(agent_id="billing", intent="orders")
    return session, agent.wrap(httpx.Client(base_url=service.base_url), session, connector="http")


def rolled_back_by_the_server(tenant: Tenant, session_id: str) -> tuple[dict[str, Any], DisplayStatus]:
    """The session's rollback job once the server's workers have run it (REST, long-polled), and how the
    session then shows."""
    with httpx.Client(base_url=tenant.url, headers={"Authorization": f"Bearer {tenant.key}"}) as api:
        job: dict[str, Any] = api.get(f"/sessions/{session_id}/rollback", params={"wait": 30}).json()
        shown = DisplayStatus(api.get(f"/sessions/{session_id}").json()["displayStatus"])
    return job, shown


def test_calls_made_while_the_server_is_away_are_replayed_in_order_once_it_is_back(
    agent: AgentRein, tenant: Tenant, relay: Relay, service: FakeService, journal_in_tmp: Path
) -> None:
    session = agent.new_session(agent_id="billing", intent="orders")
    client = agent.wrap(httpx.Client(base_url=service.base_url), session, connector="http")
    client.post("/v1/orders", json={"n": 1})
    relay.pause()
    with pytest.warns(RuntimeWarning, match="journaled"):
        client.post("/v1/orders", json={"n": 2})
    client.post("/v1/orders", json={"n": 3})
    assert len(service.collection("orders")) == 3
    assert journal_in_tmp.exists()
    relay.resume()
    client.post("/v1/orders", json={"n": 4})  # the journal goes first, so the order of the records is kept
    stored = agent.get_session(session)  # the agent's own read: with the last call's confirmation
    assert [a.payload["body"]["n"] for a in stored.actions] == [1, 2, 3, 4]
    assert [a.status for a in stored.actions] == [ActionStatus.SUCCESS] * 4
    sent_keys = [r.idempotency_key for r in service.calls("POST")]
    assert [a.idempotency_key for a in stored.actions] == sent_keys
    reader = tenant.client()
    rolled_back = reader.rollback_session(session)
    assert rolled_back.display_status is DisplayStatus.REVERTED
    assert service.collection("orders") == {}
    reader.close()


def test_a_call_journaled_while_the_server_is_away_reaches_it_once_it_is_back_with_no_further_call_of_the_agent(
    agent: AgentRein, tenant: Tenant, relay: Relay, service: FakeService, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_outbox, "RETRY_DELAY", 0.1)  # the outbox's thread tries again soon
    session = agent.new_session(agent_id="billing", intent="orders")
    client = agent.wrap(httpx.Client(base_url=service.base_url), session, connector="http")
    relay.pause()
    with pytest.warns(RuntimeWarning, match="journaled"):
        client.post("/v1/orders", json={"n": 1})
    relay.resume()
    deadline = time.monotonic() + 30
    with tenant.client() as reader:  # the agent makes no call: it waits, as an idle agent would
        while not (actions := reader.get_session(session.id).actions) and time.monotonic() < deadline:
            time.sleep(0.1)
    assert [(a.payload["body"]["n"], a.status) for a in actions] == [(1, ActionStatus.SUCCESS)]


def test_an_outcome_the_server_missed_is_confirmed_from_the_journal(
    agent: AgentRein, tenant: Tenant, relay: Relay, service: FakeService
) -> None:
    session = agent.new_session(agent_id="billing", intent="orders")
    client = agent.wrap(httpx.Client(base_url=service.base_url), session, connector="http")
    arrived, release = service.hold("POST", "/v1/orders")
    call = threading.Thread(target=client.post, args=("/v1/orders",), kwargs={"json": {}})
    call.start()
    assert arrived.wait(timeout=30)  # recorded write-ahead; now the server goes away mid-call
    relay.pause()
    release.set()
    call.join(timeout=30)  # the outcome is kept (and sent later), the call returns as ever
    reader = tenant.client()
    assert [a.status for a in reader.get_session(session).actions] == [ActionStatus.CLEARED]
    relay.resume()
    agent.close()  # replays what is left
    (action,) = reader.get_session(session).actions
    assert action.status is ActionStatus.SUCCESS
    assert action.undo is not None and action.undo.type == "http-delete"
    reader.close()


def test_closed_mode_refuses_a_call_while_the_server_is_away_and_the_session_is_rolled_back_once_it_is_back(
    agent: AgentRein, tenant: Tenant, relay: Relay, service: FakeService
) -> None:
    session = agent.new_session(agent_id="billing", intent="orders")
    client = agent.wrap(httpx.Client(base_url=service.base_url), session, connector="http", failure_mode="closed")
    client.post("/v1/orders", json={"n": 1})
    relay.pause()
    with pytest.raises(AgentReinUnavailableError) as raised:
        client.post("/v1/orders", json={"n": 2})
    assert any("the rollback is journaled" in note for note in raised.value.__notes__)
    assert len(service.calls("POST")) == 1  # the refused call never ran
    relay.resume()
    agent.close()  # replays the rollback that action logging failing called for
    job, shown = rolled_back_by_the_server(tenant, session.id)
    assert job["status"] == "SUCCEEDED" and job["trigger"].startswith("action logging failed: AgentReinUnavailable")
    assert shown is DisplayStatus.REVERTED
    assert service.collection("orders") == {}


def test_a_session_opened_while_the_server_is_away_is_created_with_its_calls_and_completion_once_it_is_back(
    agent: AgentRein, tenant: Tenant, relay: Relay, service: FakeService
) -> None:
    session, client = opened_while_the_server_is_away(agent, relay, service)
    client.post("/v1/orders", json={"n": 1})
    client.post("/v1/orders", json={"n": 2})
    assert agent.complete_session(session).status is SessionStatus.COMPLETED
    with pytest.raises(AgentReinUnavailableError):
        agent.get_session(session)
    reader = tenant.client()
    with pytest.raises(NotFoundError):
        reader.get_session(session.id)  # the server itself is up: nothing reached it
    relay.resume()
    agent.close()  # replays what is journaled
    stored = reader.get_session(session.id)
    assert (stored.agent_id, stored.intent, stored.status) == ("billing", "orders", SessionStatus.COMPLETED)
    assert [a.payload["body"]["n"] for a in stored.actions] == [1, 2]
    assert [a.status for a in stored.actions] == [ActionStatus.SUCCESS] * 2
    assert [a.idempotency_key for a in stored.actions] == [r.idempotency_key for r in service.calls("POST")]
    reader.close()


def test_a_rollback_asked_for_while_the_server_is_away_is_journaled_and_made_once_it_is_back(
    agent: AgentRein, tenant: Tenant, relay: Relay, service: FakeService
) -> None:
    session, client = opened_while_the_server_is_away(agent, relay, service)
    client.post("/v1/orders", json={})
    with pytest.raises(AgentReinUnavailableError, match=r"rollback of session .* is journaled"):
        agent.rollback_session(session)
    assert len(service.collection("orders")) == 1
    relay.resume()
    agent.close()  # replays the session, its call, then the rollback request
    job, shown = rolled_back_by_the_server(tenant, session.id)
    assert job["status"] == "SUCCEEDED" and job["trigger"] == "requested: rollback_session()"
    assert shown is DisplayStatus.REVERTED
    assert service.collection("orders") == {}


def test_closed_mode_opens_no_session_while_the_server_is_away(
    agent: AgentRein, relay: Relay, journal_in_tmp: Path
) -> None:
    relay.pause()
    with pytest.raises(AgentReinUnavailableError):
        agent.new_session(agent_id="billing", intent="orders", failure_mode="closed")
    assert not journal_in_tmp.exists()


def test_replaying_the_same_journal_entry_twice_records_it_once(tenant: Tenant) -> None:
    ar = tenant.client()
    session = ar.new_session(agent_id="billing", intent="orders")
    body = {
        "idempotencyKey": "agentrein-journal-abc",
        "connector": "http",
        "apiName": "POST /v1/orders",
        "operationType": OperationType.CREATE,
        "status": "SUCCESS",
        "response": {"statusCode": 201},
        "undo": {"type": "http-delete", "url": "http://127.0.0.1:9/v1/orders/1"},
    }
    with httpx.Client(base_url=tenant.url, headers={"Authorization": f"Bearer {tenant.key}"}) as api:
        first = api.post(f"/sessions/{session.id}/journal", json=body).json()
        second = api.post(f"/sessions/{session.id}/journal", json=body).json()
    assert first["actionId"] == second["actionId"]
    assert [a.action_id for a in ar.get_session(session).actions] == [first["actionId"]]
    ar.close()


def test_a_journaled_call_that_reaches_the_server_after_its_session_was_rolled_back_is_undone_too(
    tenant: Tenant, service: FakeService
) -> None:
    ar = tenant.client()
    session = ar.new_session(agent_id="billing", intent="orders")
    ar.wrap(httpx.Client(base_url=service.base_url), session, connector="http").post("/v1/orders", json={"n": 1})
    ar.rollback_session(session)
    with httpx.Client(base_url=service.base_url) as direct:  # a call that ran while the agent's server was away
        order = direct.post("/v1/orders", json={"n": 2}).json()["id"]
    body = {
        "idempotencyKey": "agentrein-journal-late",
        "connector": "http",
        "apiName": "POST /v1/orders",
        "operationType": OperationType.CREATE,
        "status": "SUCCESS",
        "response": {"statusCode": 201},
        "undo": {"type": "http-delete", "url": f"{service.base_url}/v1/orders/{order}"},
    }
    with httpx.Client(base_url=tenant.url, headers={"Authorization": f"Bearer {tenant.key}"}) as api:
        assert api.post(f"/sessions/{session.id}/journal", json=body).status_code == 201
    job, shown = rolled_back_by_the_server(tenant, session.id)
    assert job["status"] == "SUCCEEDED" and shown is DisplayStatus.REVERTED
    assert service.collection("orders") == {}
    ar.close()


def test_a_journaled_call_that_a_policy_would_have_blocked_is_held_for_review(tenant: Tenant) -> None:
    ar = tenant.client()
    ar.add_policy(name="no deletes", effect="BLOCK", operation_type="DELETE")
    session = ar.new_session(agent_id="billing", intent="orders")
    body = {
        "idempotencyKey": "agentrein-journal-def",
        "connector": "http",
        "apiName": "DELETE /v1/orders/1",
        "operationType": OperationType.DELETE,
        "status": "SUCCESS",
    }
    with httpx.Client(base_url=tenant.url, headers={"Authorization": f"Bearer {tenant.key}"}) as api:
        recorded = api.post(f"/sessions/{session.id}/journal", json=body).json()
    assert recorded["status"] == "SUCCESS" and recorded["policyName"] == "no deletes"
    (review,) = ar.list_approvals(status="PENDING")
    assert review.action_id == recorded["actionId"]
    ar.close()


def test_entries_are_replayed_only_to_the_backend_that_journaled_them(journal_in_tmp: Path) -> None:
    call = ExecutedCall("agentrein-journal-x", "http", "POST /v1/orders", OperationType.CREATE, {}, succeeded=True)
    journaled(Outbox("server one, key a", journal_in_tmp, recorder=AWAY), CallRecorded("ses_1", call))
    other = Outbox("server two, key b", journal_in_tmp, recorder=cast(Recorder, object()))
    assert not other.has_entries()
    assert other.replay() == 0  # not even looked at: the backend would fail if asked
    assert Outbox("server one, key a", journal_in_tmp, recorder=AWAY).has_entries()


def test_the_journal_on_disk_holds_no_secret_of_a_session_opened_meanwhile_nor_of_its_calls_undos(
    agent: AgentRein, relay: Relay, service: FakeService, journal_in_tmp: Path
) -> None:
    planted = "db_pw: letmein-db-pw"
    relay.pause()
    with pytest.warns(RuntimeWarning, match="unavailable"):
        session = agent.new_session(agent_id=f"agent {planted}", intent=f"orders, {planted}")
    cancel = {"type": "http-request", "method": "POST", "path": "/v1/orders/{id}/cancel", "json": {"note": planted}}
    client = agent.wrap(httpx.Client(base_url=service.base_url), session, connector="http", undo={"POST /v1/*": cancel})
    client.post("/v1/orders", json={})
    on_disk = [p.read_bytes() for p in journal_in_tmp.parent.iterdir() if p.name.startswith(journal_in_tmp.stem)]
    assert on_disk and all(b"letmein-db-pw" not in content for content in on_disk)
    assert any(b"db_pw: [REDACTED]" in content for content in on_disk)


def test_the_journal_is_kept_in_the_users_state_directory_where_a_process_started_elsewhere_finds_it(
    tenant: Tenant, relay: Relay, service: FakeService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTREIN_JOURNAL")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    here, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
    here.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(here)
    with AgentRein(base_url=relay.url(), api_key=tenant.key) as first:
        relay.pause()
        with pytest.warns(RuntimeWarning) as warned:
            session = first.new_session(agent_id="billing", intent="orders")
        client = first.wrap(httpx.Client(base_url=service.base_url), session, connector="http")
        client.post("/v1/orders", json={"n": 1})
    (journal,) = (tmp_path / "state" / "agentrein").glob("journal-*.db")
    # Only AgentRein's warning: a socket another test left to the garbage collector may warn meanwhile too.
    (message,) = [w.message for w in warned if w.category is RuntimeWarning]
    assert f"journaled in {journal} until" in str(message)
    assert tenant.key not in journal.name
    assert not list(here.iterdir())  # nothing in the working directory
    relay.resume()
    monkeypatch.chdir(elsewhere)
    AgentRein(base_url=relay.url(), api_key=tenant.key).close()  # a later process replays what it finds
    with tenant.client() as reader:
        assert [a.payload["body"]["n"] for a in reader.get_session(session.id).actions] == [1]


def test_each_server_and_key_has_a_journal_of_its_own(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("AGENTREIN_JOURNAL")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    paths = {journal_file(f"http://127.0.0.1:{port} key {key}") for port in (8000, 8001) for key in ("ab", "cd")}
    assert len(paths) == 4 and all(p.parent == tmp_path / "agentrein" for p in paths)
    assert journal_file("any", "mine.db") == Path("mine.db").absolute()


def test_a_journal_an_older_version_left_in_the_working_directory_is_taken_over_and_replayed(
    tenant: Tenant, relay: Relay, service: FakeService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTREIN_JOURNAL")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)
    former = tmp_path / "agentrein-journal.db"  # where every journal was kept before the state directory
    with AgentRein(base_url=relay.url(), api_key=tenant.key, journal_path=former) as older:
        relay.pause()
        with pytest.warns(RuntimeWarning, match="journaled"):
            session = older.new_session(agent_id="billing", intent="orders")
        client = older.wrap(httpx.Client(base_url=service.base_url), session, connector="http")
        client.post("/v1/orders", json={"n": 1})
        client.post("/v1/orders", json={"n": 2})
    journaled(Outbox("another server, another key", former, recorder=AWAY), SessionCompleted(session.id, utcnow()))
    relay.resume()
    AgentRein(base_url=relay.url(), api_key=tenant.key).close()  # upgraded: finds it, replays it
    with tenant.client() as reader:
        assert [a.payload["body"]["n"] for a in reader.get_session(session.id).actions] == [1, 2]
    with closing(sqlite3.connect(former)) as left:  # only another server's and key's entry is left there
        assert left.execute("SELECT DISTINCT backend FROM outbox").fetchall() == [("another server, another key",)]


def test_an_agent_starts_when_the_journal_an_older_version_left_cannot_be_taken_over(
    tenant: Tenant, relay: Relay, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("AGENTREIN_JOURNAL")
    monkeypatch.chdir(tmp_path)
    former = tmp_path / "agentrein-journal.db"
    journaled(Outbox("another server, another key", former, recorder=AWAY), SessionCompleted("ses_1", utcnow()))
    not_a_directory = tmp_path / "state"
    not_a_directory.write_text("")  # where the state directory would be: it cannot be made
    monkeypatch.setenv("XDG_STATE_HOME", str(not_a_directory))
    AgentRein(base_url=relay.url(), api_key=tenant.key).close()
    assert "could not take over the journal an older version left" in caplog.text
    assert Outbox("another server, another key", former, recorder=AWAY).has_entries()


# A write-ahead record whose answer the agent never got -------------------------------------------------------


def stored_calls(agent: AgentRein, session: SessionInfo) -> list[tuple[Any, ActionStatus, str]]:
    """The session's records as the server keeps them (the agent's own read, which its confirmations reach
    first): each call's number, status and key."""
    return [(a.payload["body"]["n"], a.status, a.idempotency_key) for a in agent.get_session(session).actions]


def test_a_write_ahead_record_whose_answer_was_lost_is_asked_for_again_and_its_call_recorded_once(
    agent: AgentRein, tenant: Tenant, relay: Relay, service: FakeService
) -> None:
    session = agent.new_session(agent_id="billing", intent="orders")
    client = agent.wrap(httpx.Client(base_url=service.base_url), session, connector="http")
    relay.lose_answer(f"POST /sessions/{session.id}/actions")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not journaled: the record was there
        client.post("/v1/orders", json={"n": 1})
    assert relay.requests.count(f"POST /sessions/{session.id}/actions") == 2
    (sent,) = service.calls("POST")
    assert stored_calls(agent, session) == [(1, ActionStatus.SUCCESS, sent.idempotency_key)]


def test_a_call_run_after_its_write_ahead_answer_was_lost_in_an_outage_settles_that_record_when_replayed(
    agent: AgentRein, tenant: Tenant, relay: Relay, service: FakeService
) -> None:
    session = agent.new_session(agent_id="billing", intent="orders")
    client = agent.wrap(httpx.Client(base_url=service.base_url), session, connector="http")
    relay.lose_answer(f"POST /sessions/{session.id}/actions", then_pause=True)
    with pytest.warns(RuntimeWarning, match="journaled"):
        client.post("/v1/orders", json={"n": 1})
    relay.resume()
    client.post("/v1/orders", json={"n": 2})  # the journal is replayed first
    keys = [c.idempotency_key for c in service.calls("POST")]
    # One record for the first call, not a CLEARED record beside a journaled one.
    assert stored_calls(agent, session) == [(1, ActionStatus.SUCCESS, keys[0]), (2, ActionStatus.SUCCESS, keys[1])]
    with tenant.client() as reader:
        assert reader.rollback_session(session).display_status is DisplayStatus.REVERTED
    assert service.collection("orders") == {}

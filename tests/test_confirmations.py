"""Server mode confirms a call with the session's next request (or in the background moments later): one
request per wrapped call in the agent's path, and still no confirmation lost (a killed agent's is sent by the
next process on its journal), no success left behind by a rollback, no read older than the last call."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from relay import Relay
from serving import RunningServer, Tenant

from agentrein import ActionStatus, AgentRein, DisplayStatus, SessionInfo
from agentrein_core import rules
from agentrein_testing import FakeService

#: What an agent process runs before it is killed: one wrapped call, then SIGKILL at once, before any
#: confirmation could be sent (the background thread is told to wait a minute).
KILLED_AGENT = """
import os, signal, sys
import httpx
import agentrein._outbox
from agentrein import AgentRein

agentrein._outbox.FLUSH_DELAY = 60.0
url, key, journal, service = sys.argv[1:]
ar = AgentRein(base_url=url, api_key=key, journal_path=journal)
session = ar.new_session(agent_id="killed", intent="one order")
client = ar.wrap(httpx.Client(base_url=service), session, connector="http")
client.post("/v1/orders", json={"n": 1})
print(session.id, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.fixture
def tenant(server: RunningServer) -> Tenant:
    return server.tenant()


@pytest.fixture
def slow_relay(server: RunningServer) -> Iterator[Relay]:
    """The agent's way to the server: every piece of the server's answers arrives 20 ms late."""
    relay = Relay.to_server(server.url, delay=0.02)
    yield relay
    relay.cut()


@pytest.fixture
def agent(tenant: Tenant, slow_relay: Relay) -> Iterator[AgentRein]:
    """The agent, through the slow relay."""
    with AgentRein(base_url=slow_relay.url(), api_key=tenant.key) as ar:
        yield ar


def wrapped_in_a_session(agent: AgentRein, service: FakeService) -> tuple[SessionInfo, httpx.Client]:
    """A new session of ``agent``, and a client of ``service`` wrapped in it."""
    session = agent.new_session(agent_id="billing", intent="orders")
    return session, agent.wrap(httpx.Client(base_url=service.base_url), session, connector="http")


def rest(tenant: Tenant) -> httpx.Client:
    """The server's REST API with the tenant's operator key, straight (not through the relay)."""
    return httpx.Client(base_url=tenant.url, headers={"Authorization": f"Bearer {tenant.key}"}, timeout=30)


def test_a_wrapped_call_costs_one_request_to_the_server_and_every_confirmation_arrives(
    agent: AgentRein, slow_relay: Relay, service: FakeService, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("agentrein._outbox.FLUSH_DELAY", 60.0)  # only the calls themselves send them
    session, client = wrapped_in_a_session(agent, service)
    per_call = []
    for n in range(5):
        before = len(slow_relay.requests)
        client.post("/v1/orders", json={"n": n})
        per_call.append(slow_relay.requests[before:])
    assert per_call == [[f"POST /sessions/{session.id}/actions"]] * 5
    assert [a.status for a in agent.get_session(session).actions] == [ActionStatus.SUCCESS] * 5


def test_an_agent_killed_right_after_its_call_has_it_confirmed_by_the_next_process_on_its_journal(
    tenant: Tenant, service: FakeService, tmp_path: Path
) -> None:
    journal = tmp_path / "journal.db"
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_AGENT, tenant.url, tenant.key, str(journal), service.base_url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert killed.returncode == -9, killed.stderr
    session_id = killed.stdout.strip()
    with rest(tenant) as api:
        (left,) = api.get(f"/sessions/{session_id}").json()["actions"]
    assert left["status"] == ActionStatus.CLEARED  # the call ran; its confirmation died with the process
    with AgentRein(base_url=tenant.url, api_key=tenant.key, journal_path=journal) as successor:
        (action,) = successor.get_session(session_id).actions
    assert action.status is ActionStatus.SUCCESS
    assert action.undo is not None and action.undo.type == "http-delete"


def test_a_success_a_slow_network_confirms_after_an_operators_rollback_is_undone_too(
    agent: AgentRein, tenant: Tenant, service: FakeService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rollback waits a while for the outcome of a call under way (``rules.CONFIRMATION_AWAITED``, shortened
    here to nothing): one that arrives even later still has its call undone."""
    monkeypatch.setattr(rules, "CONFIRMATION_AWAITED", timedelta(0))
    session, client = wrapped_in_a_session(agent, service)
    client.post("/v1/orders", json={"n": 1})
    arrived, release = service.hold("POST", "/v1/orders")
    call = threading.Thread(target=client.post, args=("/v1/orders",), kwargs={"json": {"n": 2}})
    call.start()
    assert arrived.wait(timeout=30)  # the second call is recorded and under way
    with tenant.client() as operator:
        first_rollback = operator.rollback_session(session)  # undoes the first; the second is not confirmed
    assert [a.status for a in first_rollback.actions] == [ActionStatus.ROLLED_BACK, ActionStatus.CLEARED]
    release.set()
    call.join(timeout=30)
    assert [a.status for a in agent.get_session(session).actions][1] is not ActionStatus.CLEARED
    with rest(tenant) as api:
        job: dict[str, Any] = api.get(f"/sessions/{session.id}/rollback", params={"wait": 30}).json()
        shown = api.get(f"/sessions/{session.id}").json()
    assert [a["status"] for a in shown["actions"]] == [ActionStatus.ROLLED_BACK] * 2
    assert shown["displayStatus"] == DisplayStatus.REVERTED and shown["status"] == "ROLLED_BACK"
    assert service.collection("orders") == {}
    assert job["status"] == "SUCCEEDED" and job["trigger"].endswith("confirmed after the session was rolled back")


def test_the_agents_read_right_after_a_call_over_a_slow_network_shows_the_call_succeeded(
    agent: AgentRein, service: FakeService
) -> None:
    session, client = wrapped_in_a_session(agent, service)
    client.post("/v1/orders", json={"n": 1})
    (action,) = agent.get_session(session).actions
    assert action.status is ActionStatus.SUCCESS


def test_a_rollback_the_agent_asks_for_right_after_a_call_over_a_slow_network_undoes_that_call(
    agent: AgentRein, service: FakeService
) -> None:
    session, client = wrapped_in_a_session(agent, service)
    client.post("/v1/orders", json={"n": 1})
    rolled_back = agent.rollback_session(session)
    assert [a.status for a in rolled_back.actions] == [ActionStatus.ROLLED_BACK]
    assert rolled_back.display_status is DisplayStatus.REVERTED
    assert service.collection("orders") == {}


def recorded_call(api: httpx.Client, session_id: str, **extra: Any) -> httpx.Response:
    """A write-ahead record of a call to the fake service, through the REST API."""
    body = {"connector": "http", "apiName": "POST /v1/orders", "operationType": "CREATE", "payload": {}, **extra}
    return api.post(f"/sessions/{session_id}/actions", json=body)


def test_a_write_ahead_record_confirms_the_calls_it_carries_and_names_those_it_could_not(tenant: Tenant) -> None:
    with rest(tenant) as api:
        session_id = api.post("/sessions", json={"agentId": "billing"}).json()["id"]
        earlier = recorded_call(api, session_id).json()["action"]["actionId"]
        confirm = [{"actionId": earlier, "response": {"statusCode": 201}}, {"actionId": "act_unknown"}]
        logged = recorded_call(api, session_id, confirm=confirm)
        statuses = [a["status"] for a in api.get(f"/sessions/{session_id}").json()["actions"]]
    assert logged.status_code == 201
    assert [u["actionId"] for u in logged.json()["refusedConfirmations"]] == ["act_unknown"]
    assert statuses == [ActionStatus.SUCCESS, ActionStatus.CLEARED]


def test_a_refused_confirmation_says_whether_the_calls_success_is_on_record_already(tenant: Tenant) -> None:
    with rest(tenant) as api:
        session_id = api.post("/sessions", json={"agentId": "billing"}).json()["id"]
        confirmed = recorded_call(api, session_id).json()["action"]["actionId"]
        failed = recorded_call(api, session_id).json()["action"]["actionId"]
        api.patch(f"/sessions/{session_id}/actions/{confirmed}", json={"status": "SUCCESS", "response": {}})
        api.patch(
            f"/sessions/{session_id}/actions/{failed}",
            json={"status": "FAILED", "error": "timed out", "rollsBack": False},
        )
        confirm = [{"actionId": confirmed, "response": {}}, {"actionId": failed, "response": {}}]
        logged = recorded_call(api, session_id, confirm=confirm)
    refused = {r["actionId"]: r["settled"] for r in logged.json()["refusedConfirmations"]}
    assert refused == {confirmed: True, failed: False}


def test_a_write_ahead_record_refused_during_a_rollback_still_confirms_the_calls_it_carries(
    tenant: Tenant, service: FakeService, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rules, "CONFIRMATION_AWAITED", timedelta(0))  # the rollback ends with the call under way
    with rest(tenant) as api:
        session_id = api.post("/sessions", json={"agentId": "billing"}).json()["id"]
        done = recorded_call(api, session_id).json()["action"]["actionId"]
        orders = [httpx.post(f"{service.base_url}/v1/orders", json={}).json()["id"] for _ in range(2)]
        undos = [{"type": "http-delete", "url": f"{service.base_url}/v1/orders/{order}"} for order in orders]
        api.patch(f"/sessions/{session_id}/actions/{done}", json={"status": "SUCCESS", "undo": undos[0]})
        under_way = recorded_call(api, session_id).json()["action"]["actionId"]
        api.post(f"/sessions/{session_id}/rollback", json={})
        first = api.get(f"/sessions/{session_id}/rollback", params={"wait": 30}).json()
        refused = recorded_call(api, session_id, confirm=[{"actionId": under_way, "undo": undos[1]}])
        (_, confirmed) = api.get(f"/sessions/{session_id}").json()["actions"]
    assert first["status"] == "SUCCEEDED"
    assert refused.status_code == 409, refused.text
    assert confirmed["status"] != ActionStatus.CLEARED

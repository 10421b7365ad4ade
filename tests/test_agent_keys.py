"""Agent keys act on their own sessions only: through a real server on 127.0.0.1, two agent keys of one
organisation, where agent B may neither record in, settle, decide the fate of, nor read agent A's session (each
answered ``404``, as another organisation's records are), while A and operator keys may."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from serving import RunningServer, Tenant, session_with_a_created_order

from agentrein import AgentRein
from agentrein_core.engine.recording import CHOSEN_ID_REFUSED
from agentrein_core.ids import new_id
from agentrein_core.statuses import Role
from agentrein_testing import FakeService

CALL = {"connector": "http", "apiName": "POST /v1/orders", "operationType": "CREATE", "payload": {}}
HELD = {**CALL, "requiresApproval": True}
INTENT = "pay the supplier invoices"


@pytest.fixture
def tenant(server: RunningServer) -> Tenant:
    return server.tenant()


def client(tenant: Tenant, key: str) -> httpx.Client:
    return httpx.Client(base_url=tenant.url, headers={"Authorization": f"Bearer {key}"})


@pytest.fixture
def operator(tenant: Tenant) -> Iterator[httpx.Client]:
    with client(tenant, tenant.key) as api:
        yield api


@pytest.fixture
def agent_a(server: RunningServer, tenant: Tenant) -> Iterator[httpx.Client]:
    with client(tenant, server.key(tenant, Role.AGENT)) as api:
        yield api


@pytest.fixture
def agent_b(server: RunningServer, tenant: Tenant) -> Iterator[httpx.Client]:
    with client(tenant, server.key(tenant, Role.AGENT)) as api:
        yield api


def open_session(api: httpx.Client) -> str:
    opened = api.post("/sessions", json={"agentId": "billing", "intent": INTENT})
    assert opened.status_code == 201, opened.text
    return str(opened.json()["id"])


def record(api: httpx.Client, session_id: str, call: dict[str, Any] = CALL) -> dict[str, Any]:
    logged = api.post(f"/sessions/{session_id}/actions", json=call)
    assert logged.status_code == 201, logged.text
    return dict(logged.json())


def not_found(response: httpx.Response) -> None:
    """Refused as a record of another organisation is: nothing says it exists, nothing of it is shown."""
    assert response.status_code == 404, response.text
    problem = response.json()
    assert problem["type"].endswith("/not-found") and problem["detail"].startswith("no ")
    assert INTENT not in response.text


def action_status(api: httpx.Client, session_id: str, action_id: str) -> str:
    (action,) = [a for a in api.get(f"/sessions/{session_id}").json()["actions"] if a["actionId"] == action_id]
    return str(action["status"])


def test_another_agent_key_cannot_record_a_call_in_a_session_it_did_not_open(
    agent_a: httpx.Client, agent_b: httpx.Client
) -> None:
    session_id = open_session(agent_a)
    not_found(agent_b.post(f"/sessions/{session_id}/actions", json=CALL))
    assert agent_a.get(f"/sessions/{session_id}").json()["actions"] == []
    record(agent_a, session_id)


def test_another_agent_key_cannot_confirm_a_call_of_a_session_it_did_not_open(
    agent_a: httpx.Client, agent_b: httpx.Client
) -> None:
    session_id = open_session(agent_a)
    action_id = record(agent_a, session_id)["action"]["actionId"]
    not_found(agent_b.patch(f"/sessions/{session_id}/actions/{action_id}", json={"status": "SUCCESS"}))
    # Nor carried with a record of its own session.
    carried = record(agent_b, open_session(agent_b), {**CALL, "confirm": [{"actionId": action_id}]})
    assert [r["actionId"] for r in carried["refusedConfirmations"]] == [action_id]
    assert action_status(agent_a, session_id, action_id) == "CLEARED"
    confirmed = agent_a.patch(f"/sessions/{session_id}/actions/{action_id}", json={"status": "SUCCESS"})
    assert confirmed.status_code == 200 and confirmed.json()["status"] == "SUCCESS"


def test_another_agent_key_cannot_fail_a_call_of_a_session_it_did_not_open(
    agent_a: httpx.Client, agent_b: httpx.Client
) -> None:
    session_id = open_session(agent_a)
    action_id = record(agent_a, session_id)["action"]["actionId"]
    not_found(agent_b.patch(f"/sessions/{session_id}/actions/{action_id}", json={"status": "FAILED"}))
    assert action_status(agent_a, session_id, action_id) == "CLEARED"
    assert agent_a.get(f"/sessions/{session_id}").json()["status"] == "ACTIVE"
    failed = agent_a.patch(f"/sessions/{session_id}/actions/{action_id}", json={"status": "FAILED"})
    assert failed.status_code == 200 and failed.json()["status"] == "FAILED"


def test_another_agent_key_cannot_withdraw_an_approval_of_a_session_it_did_not_open(
    agent_a: httpx.Client, agent_b: httpx.Client
) -> None:
    session_id = open_session(agent_a)
    held = record(agent_a, session_id, HELD)
    approval_id, action_id = held["approval"]["approvalId"], held["action"]["actionId"]
    not_found(agent_b.post(f"/approvals/{approval_id}/withdraw", json={"reason": "not mine"}))
    assert agent_a.get(f"/approvals/{approval_id}").json()["status"] == "PENDING"
    assert action_status(agent_a, session_id, action_id) == "PENDING_APPROVAL"
    withdrawn = agent_a.post(f"/approvals/{approval_id}/withdraw", json={"reason": "interrupted"})
    assert withdrawn.status_code == 200 and withdrawn.json()["status"] == "REJECTED"


def test_another_agent_key_cannot_complete_a_session_it_did_not_open(
    agent_a: httpx.Client, agent_b: httpx.Client
) -> None:
    session_id = open_session(agent_a)
    not_found(agent_b.post(f"/sessions/{session_id}/complete"))
    assert agent_a.get(f"/sessions/{session_id}").json()["status"] == "ACTIVE"
    assert agent_a.post(f"/sessions/{session_id}/complete").json()["status"] == "COMPLETED"


def test_another_agent_key_cannot_roll_back_a_session_it_did_not_open(
    agent_a: httpx.Client, agent_b: httpx.Client, service: FakeService
) -> None:
    session_id, order_id = session_with_a_created_order(agent_a, service)
    not_found(agent_b.post(f"/sessions/{session_id}/rollback", json={}))
    assert agent_a.get(f"/sessions/{session_id}/rollback").status_code == 404  # none was started
    assert order_id in service.collection("orders")
    assert agent_a.post(f"/sessions/{session_id}/rollback", json={}).status_code == 202
    assert agent_a.get(f"/sessions/{session_id}/rollback", params={"wait": 30}).json()["status"] == "SUCCEEDED"


def test_another_agent_key_cannot_report_a_failure_of_a_session_it_did_not_open(
    agent_a: httpx.Client, agent_b: httpx.Client
) -> None:
    session_id = open_session(agent_a)
    not_found(agent_b.post(f"/sessions/{session_id}/fail", json={"reason": "action logging failed"}))
    assert agent_a.get(f"/sessions/{session_id}").json()["status"] == "ACTIVE"
    reported = agent_a.post(f"/sessions/{session_id}/fail", json={"reason": "action logging failed"})
    assert reported.status_code == 200 and reported.json()["status"] == "FAILED"


def test_another_agent_key_cannot_replay_a_journaled_call_into_a_session_it_did_not_open(
    agent_a: httpx.Client, agent_b: httpx.Client
) -> None:
    session_id = open_session(agent_a)
    journaled = {**CALL, "idempotencyKey": "agentrein-journal-1", "status": "SUCCESS", "response": {"id": "o1"}}
    not_found(agent_b.post(f"/sessions/{session_id}/journal", json=journaled))
    assert agent_a.get(f"/sessions/{session_id}").json()["actions"] == []
    replayed = agent_a.post(f"/sessions/{session_id}/journal", json=journaled)
    assert replayed.status_code == 201, replayed.text
    # A replay repeated by another key is not handed the record made first.
    not_found(agent_b.post(f"/sessions/{session_id}/journal", json=journaled))


def test_another_agent_key_cannot_read_a_session_it_did_not_open_nor_its_approvals(
    agent_a: httpx.Client, agent_b: httpx.Client, service: FakeService
) -> None:
    session_id, _ = session_with_a_created_order(agent_a, service)
    approval_id = record(agent_a, session_id, HELD)["approval"]["approvalId"]
    not_found(agent_b.get(f"/sessions/{session_id}"))
    not_found(agent_b.get(f"/sessions/{session_id}/rollback"))
    not_found(agent_b.get(f"/approvals/{approval_id}"))
    not_found(agent_b.get(f"/approvals/{approval_id}", params={"wait": 0.1}))
    own = open_session(agent_b)
    assert [s["id"] for s in agent_b.get("/sessions").json()["sessions"]] == [own]
    assert agent_b.get("/approvals").json() == []
    assert [s["id"] for s in agent_a.get("/sessions").json()["sessions"]] == [session_id]
    assert [p["approvalId"] for p in agent_a.get("/approvals").json()] == [approval_id]


def test_an_operator_key_acts_on_any_agents_session(agent_a: httpx.Client, operator: httpx.Client) -> None:
    session_id = open_session(agent_a)
    confirmed, failed = (record(agent_a, session_id)["action"]["actionId"] for _ in range(2))
    approval_id = record(agent_a, session_id, HELD)["approval"]["approvalId"]
    assert operator.get(f"/sessions/{session_id}").json()["intent"] == INTENT
    assert [p["approvalId"] for p in operator.get("/approvals").json()] == [approval_id]
    assert operator.post(f"/approvals/{approval_id}/withdraw", json={}).json()["status"] == "REJECTED"
    ok = operator.patch(f"/sessions/{session_id}/actions/{confirmed}", json={"status": "SUCCESS"})
    assert ok.status_code == 200 and ok.json()["status"] == "SUCCESS"
    ok = operator.patch(f"/sessions/{session_id}/actions/{failed}", json={"status": "FAILED"})
    assert ok.status_code == 200 and ok.json()["status"] == "FAILED"
    assert operator.get(f"/sessions/{session_id}/rollback", params={"wait": 30}).json()["status"] == "SUCCEEDED"


def test_one_agent_key_in_two_processes_is_one_agent(
    server: RunningServer, tenant: Tenant, service: FakeService
) -> None:
    key = server.key(tenant, Role.AGENT)
    first, second = AgentRein(base_url=tenant.url, api_key=key), AgentRein(base_url=tenant.url, api_key=key)
    try:
        session = first.new_session(agent_id="billing", intent=INTENT)
        orders = second.wrap(httpx.Client(base_url=service.base_url), session, connector="http")
        assert orders.post("/v1/orders", json={}).status_code == 201
        assert second.complete_session(session).status == "COMPLETED"  # sends the call's confirmation first
        assert [a.status for a in first.get_session(session).actions] == ["SUCCESS"]
    finally:
        first.close()
        second.close()


def test_a_session_opened_offline_belongs_to_the_key_that_replays_its_creation(
    agent_a: httpx.Client, agent_b: httpx.Client
) -> None:
    creation = {"id": new_id("ses"), "agentId": "billing", "intent": INTENT}
    assert agent_a.post("/sessions", json=creation).status_code == 201
    taken = agent_b.post("/sessions", json=creation)
    assert taken.status_code == 409 and taken.json()["detail"] == CHOSEN_ID_REFUSED
    assert INTENT not in taken.text
    again = agent_a.post("/sessions", json=creation)  # a replay repeated after a crash
    assert again.status_code == 201 and again.json()["id"] == creation["id"]
    not_found(agent_b.get(f"/sessions/{creation['id']}"))


def test_a_session_no_key_opened_is_left_to_operators(
    server: RunningServer, tenant: Tenant, agent_a: httpx.Client, operator: httpx.Client
) -> None:
    """A session opened before sessions remembered their key (or by an embedded engine) has no opener: no agent
    key can tell it was its own, so only operators act on it."""
    session_id = server.engine.recording.new_session(tenant.org_id, "billing", INTENT).session_id
    not_found(agent_a.get(f"/sessions/{session_id}"))
    not_found(agent_a.post(f"/sessions/{session_id}/actions", json=CALL))
    record(operator, session_id)
    assert operator.post(f"/sessions/{session_id}/complete").json()["status"] == "COMPLETED"

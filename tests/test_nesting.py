"""Deeply nested JSON: what AgentRein accepts stays readable and can be rolled back; what nests deeper than
``MAX_DEPTH`` is refused before anything is written, on every path that stores a client's JSON; and a call
whose upstream answer nests deeper is still recorded, with a marker in place of that answer."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from serving import RunningServer, Tenant

from agentrein import ActionStatus, AgentRein, SessionStatus, ValidationError
from agentrein_core.nesting import MAX_DEPTH, bounded
from agentrein_testing import FakeService

#: How deep the answer was that made the issue's session unreadable.
ISSUE_DEPTH = 400


def nested(levels: int) -> Any:
    """A value of exactly ``levels`` nested dicts and lists."""
    value: Any = "bottom"
    for level in range(levels):
        value = {"next": value} if level % 2 else [value]
    return value


@pytest.fixture
def tenant(server: RunningServer) -> Tenant:
    return server.tenant()


@pytest.fixture
def api(tenant: Tenant) -> httpx.Client:
    return httpx.Client(base_url=tenant.url, headers={"Authorization": f"Bearer {tenant.key}"})


def new_session(api: httpx.Client) -> str:
    session_id: str = api.post("/sessions", json={"agentId": "deep", "intent": "nesting"}).json()["id"]
    return session_id


def new_action(api: httpx.Client, session_id: str, payload: dict[str, Any] | None = None) -> httpx.Response:
    body = {"connector": "http", "apiName": "POST /v1/orders", "operationType": "CREATE", "payload": payload or {}}
    return api.post(f"/sessions/{session_id}/actions", json=body)


def created_order(api: httpx.Client, service: FakeService, session_id: str, deep: Any) -> tuple[str, httpx.Response]:
    """An order the session's one action really created, confirmed with ``deep`` inside its payload, its
    response and its undo config; (order id, the confirmation's answer)."""
    logged = new_action(api, session_id, {"deep": deep})
    assert logged.status_code == 201, logged.text
    order = httpx.post(f"{service.base_url}/v1/orders", json={}).json()
    undo = {"type": "http-delete", "url": f"{service.base_url}/v1/orders/{order['id']}", "deep": deep}
    confirmed = api.patch(
        f"/sessions/{session_id}/actions/{logged.json()['action']['actionId']}",
        json={"status": "SUCCESS", "response": {"id": order["id"], "deep": deep}, "undo": undo},
    )
    return order["id"], confirmed


def refused_deep_payload(api: httpx.Client, session_id: str) -> httpx.Response:
    return new_action(api, session_id, {"deep": nested(MAX_DEPTH)})


def refused_deep_response(api: httpx.Client, session_id: str) -> httpx.Response:
    logged = new_action(api, session_id).json()["action"]["actionId"]
    return api.patch(
        f"/sessions/{session_id}/actions/{logged}", json={"status": "SUCCESS", "response": {"deep": nested(MAX_DEPTH)}}
    )


def refused_deep_undo(api: httpx.Client, session_id: str) -> httpx.Response:
    logged = new_action(api, session_id).json()["action"]["actionId"]
    undo = {"type": "none", "deep": nested(MAX_DEPTH)}
    return api.patch(f"/sessions/{session_id}/actions/{logged}", json={"status": "SUCCESS", "undo": undo})


def refused_deep_journal(api: httpx.Client, session_id: str) -> httpx.Response:
    entry = {
        "idempotencyKey": "agentrein-journal-deep",
        "connector": "http",
        "apiName": "POST /v1/orders",
        "operationType": "CREATE",
        "status": "SUCCESS",
        "response": {"deep": nested(MAX_DEPTH)},
    }
    return api.post(f"/sessions/{session_id}/journal", json=entry)


@pytest.mark.parametrize(
    ("refused", "field"),
    [
        (refused_deep_payload, "payload"),
        (refused_deep_response, "response"),
        (refused_deep_undo, "undo"),
        (refused_deep_journal, "response"),
    ],
)
def test_json_nested_deeper_than_the_limit_is_refused_naming_its_field_and_nothing_of_it_is_stored(
    api: httpx.Client, refused: Callable[[httpx.Client, str], httpx.Response], field: str
) -> None:
    session_id = new_session(api)
    answer = refused(api, session_id)
    assert answer.status_code == 400, answer.text
    assert answer.json()["type"].endswith("validation-error") and field in answer.json()["detail"]
    session = api.get(f"/sessions/{session_id}")
    assert session.status_code == 200, session.text
    assert all(a["status"] == "CLEARED" and a["response"] is None for a in session.json()["actions"])
    assert api.get("/sessions").status_code == 200


def test_json_nested_to_the_limit_is_stored_read_back_and_rolled_back(api: httpx.Client, service: FakeService) -> None:
    session_id = new_session(api)
    deep = nested(MAX_DEPTH - 1)  # inside a field's own object: exactly MAX_DEPTH levels
    order_id, confirmed = created_order(api, service, session_id, deep)
    assert confirmed.status_code == 200, confirmed.text
    assert api.get("/sessions").status_code == 200
    assert api.get(f"/sessions/{session_id}").json()["actions"][0]["response"]["deep"] == deep
    assert api.post(f"/sessions/{session_id}/rollback", json={}).status_code == 202
    job = api.get(f"/sessions/{session_id}/rollback", params={"wait": 30}).json()
    assert job["status"] == "SUCCEEDED", job
    assert api.get(f"/sessions/{session_id}").json()["status"] == SessionStatus.ROLLED_BACK
    assert order_id not in service.collection("orders")


class DeeplyAnsweringService(FakeService):
    """An upstream API that answers each creation with a history nested as deep as the issue's."""

    def handle(self, method: str, path: str, body: Any) -> tuple[int, dict[str, str], Any]:
        status, headers, answer = super().handle(method, path, body)
        return status, headers, {**answer, "history": nested(ISSUE_DEPTH)} if method == "POST" else answer


@pytest.fixture
def deep_service() -> Iterator[FakeService]:
    with DeeplyAnsweringService().running() as running:
        yield running


def test_a_call_whose_upstream_answer_nests_too_deep_is_confirmed_with_a_marker_and_rolled_back(
    ar: AgentRein, deep_service: FakeService
) -> None:
    service = deep_service
    session = ar.new_session(agent_id="deep", intent="an upstream API nests its answer deeply")
    client = ar.wrap(httpx.Client(base_url=service.base_url), session, connector="http")
    order = client.post("/v1/orders", json={"sku": "A1"}).json()
    [action] = ar.get_session(session).actions
    assert action.status is ActionStatus.SUCCESS
    assert action.response == bounded({"deep": nested(ISSUE_DEPTH)})
    assert ar.rollback_session(session).status is SessionStatus.ROLLED_BACK
    assert order["id"] not in service.collection("orders")


def test_an_agents_payload_nested_too_deep_is_refused_before_the_call_runs(ar: AgentRein, service: FakeService) -> None:
    session = ar.new_session(agent_id="deep", intent="nesting")
    client = ar.wrap(httpx.Client(base_url=service.base_url), session, connector="http")
    with pytest.raises(ValidationError, match="payload"):
        client.post("/v1/orders", json={"deep": nested(ISSUE_DEPTH)})
    assert service.calls("POST") == [] and ar.get_session(session).actions == []


def test_an_undo_override_nested_too_deep_is_refused_when_the_client_is_wrapped(
    ar: AgentRein, service: FakeService
) -> None:
    session = ar.new_session(agent_id="deep", intent="nesting")
    with pytest.raises(ValidationError, match="undo"):
        ar.wrap(
            httpx.Client(base_url=service.base_url),
            session,
            connector="http",
            undo={"POST *": {"deep": nested(MAX_DEPTH)}},
        )

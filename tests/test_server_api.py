"""The REST API through a real server on 127.0.0.1: keys, organisations and roles, problem+json errors,
long-polls, concurrent reviewers, connector settings and server-side undo."""

from __future__ import annotations

import base64
import json
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
import sqlalchemy as sa
from serving import RunningServer, Tenant, rolled_back, session_with_a_created_order

from agentrein import ActionStatus, ApprovalRejectedError, PolicyBlockedError, SessionStatus, UndoStatus
from agentrein_core.clock import utcnow
from agentrein_core.ids import new_id
from agentrein_core.model import Session
from agentrein_core.statuses import Plan, Role
from agentrein_core.store import schema
from agentrein_testing import FakeService

PROBLEM = "application/problem+json"


@pytest.fixture
def tenant(server: RunningServer) -> Tenant:
    return server.tenant()


@pytest.fixture
def api(tenant: Tenant) -> Iterator[httpx.Client]:
    """Raw HTTP with the tenant's operator key."""
    with httpx.Client(base_url=tenant.url, headers={"Authorization": f"Bearer {tenant.key}"}) as client:
        yield client


def as_key(tenant: Tenant, key: str) -> httpx.Client:
    return httpx.Client(base_url=tenant.url, headers={"Authorization": f"Bearer {key}"})


def slug(response: httpx.Response) -> str:
    assert response.headers["content-type"].startswith(PROBLEM), response.text
    problem: dict[str, Any] = response.json()
    assert problem["status"] == response.status_code and problem["detail"]
    return str(problem["type"]).rsplit("/", 1)[-1]


# keys, organisations, roles ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "header", [None, "Basic dXNlcjpwYXNz", "Bearer", "Bearer not-an-agentrein-key", "Bearer ar_unknownkey"]
)
def test_a_request_without_a_valid_key_is_refused_with_401(tenant: Tenant, header: str | None) -> None:
    headers = {"Authorization": header} if header else {}
    response = httpx.get(f"{tenant.url}/sessions", headers=headers)
    assert response.status_code == 401
    assert slug(response) == "unauthorized"
    assert response.headers["www-authenticate"] == "Bearer"


def test_another_organisations_records_answer_404_and_show_nothing(
    server: RunningServer, api: httpx.Client, tenant: Tenant
) -> None:
    session_id = api.post("/sessions", json={"agentId": "a", "intent": "secret plans"}).json()["id"]
    policy_id = api.post("/policies", json={"name": "p", "effect": "BLOCK"}).json()["policyId"]
    other = server.tenant()
    with as_key(other, other.key) as intruder:
        for response in (
            intruder.get(f"/sessions/{session_id}"),
            intruder.post(f"/sessions/{session_id}/rollback", json={}),
            intruder.post(
                f"/sessions/{session_id}/actions", json={"connector": "http", "apiName": "x", "operationType": "CREATE"}
            ),
            intruder.patch(f"/policies/{policy_id}", json={"enabled": False}),
        ):
            assert response.status_code == 404
            assert "secret plans" not in response.text
        assert intruder.get("/sessions").json()["sessions"] == []
    assert api.get(f"/sessions/{session_id}").json()["actions"] == []
    assert api.get("/policies").json()[0]["enabled"] is True


def test_an_agent_key_records_work_but_may_not_review_or_manage(
    server: RunningServer, api: httpx.Client, tenant: Tenant
) -> None:
    with as_key(tenant, server.key(tenant, Role.AGENT)) as agent:
        opened = agent.post("/sessions", json={"agentId": "a"})
        assert opened.status_code == 201
        logged = agent.post(
            f"/sessions/{opened.json()['id']}/actions",
            json={"connector": "http", "apiName": "DELETE /x", "operationType": "DELETE", "requiresApproval": True},
        ).json()
        approval_id = logged["approval"]["approvalId"]
        assert agent.get(f"/approvals/{approval_id}").json()["status"] == "PENDING"
        for response in (
            agent.post(f"/approvals/{approval_id}/approve", json={}),
            agent.post("/policies", json={"name": "p", "effect": "BLOCK"}),
            agent.put("/connectors/http", json={"enabled": False}),
            agent.post("/api-keys", json={"role": "operator"}),
        ):
            assert response.status_code == 403
            assert slug(response) == "forbidden"
    assert api.get(f"/approvals/{approval_id}").json()["status"] == "PENDING"
    assert api.get("/policies").json() == []


def test_agents_roll_back_only_active_sessions_and_operators_completed_ones_too(
    server: RunningServer, api: httpx.Client, tenant: Tenant, service: FakeService
) -> None:
    with as_key(tenant, server.key(tenant, Role.AGENT)) as agent:
        session_id, order_id = session_with_a_created_order(agent, service)
        agent.post(f"/sessions/{session_id}/complete")
        refused = agent.post(f"/sessions/{session_id}/rollback", json={})
    assert refused.status_code == 409
    assert slug(refused) == "rollback-refused"
    assert "COMPLETED" in refused.json()["detail"]
    session = rolled_back(api, session_id)
    assert session["displayStatus"] == "REVERTED"
    assert order_id not in service.collection("orders")


def test_a_session_with_nothing_executed_or_already_reverted_is_refused(
    api: httpx.Client, service: FakeService
) -> None:
    empty = api.post("/sessions", json={"agentId": "a"}).json()["id"]
    assert slug(api.post(f"/sessions/{empty}/rollback", json={})) == "rollback-refused"
    session_id, _ = session_with_a_created_order(api, service)
    rolled_back(api, session_id)
    again = api.post(f"/sessions/{session_id}/rollback", json={})
    assert again.status_code == 409
    assert slug(again) == "rollback-refused"


def test_an_operator_creates_keys_whose_secret_is_shown_once(api: httpx.Client, tenant: Tenant) -> None:
    created = api.post("/api-keys", json={"role": "agent"})
    assert created.status_code == 201
    secret = created.json()["key"]
    listed = api.get("/api-keys").json()
    assert created.json()["keyId"] in [k["keyId"] for k in listed]
    assert secret not in api.get("/api-keys").text
    with as_key(tenant, secret) as agent:
        assert agent.post("/sessions", json={"agentId": "a"}).status_code == 201


def test_a_free_plan_has_no_approval_gates(server: RunningServer, service: FakeService) -> None:
    ar = server.tenant(Plan.FREE).client()
    session = ar.new_session(agent_id="a", intent="i")
    client = ar.wrap(httpx.Client(base_url=service.base_url), session, connector="http", requires_approval=["POST *"])
    with pytest.raises(ApprovalRejectedError) as rejected:
        client.post("/v1/orders", json={})
    assert rejected.value.reason is not None and "plan" in rejected.value.reason
    assert service.calls() == []
    stored = ar.get_session(session)
    assert [a.status for a in stored.actions] == [ActionStatus.FAILED]
    assert stored.status is SessionStatus.FAILED
    ar.close()


def test_a_before_execution_policy_makes_the_write_ahead_record_wait_for_approval(
    api: httpx.Client, tenant: Tenant
) -> None:
    created = api.post(
        "/policies",
        json={
            "name": "hold refunds",
            "effect": "REQUIRE_APPROVAL",
            "apiName": "POST /v1/refunds",
            "beforeExecution": True,
            "approvalTimeoutMs": 600_000,
        },
    )
    assert created.status_code == 201, created.text
    assert created.json()["beforeExecution"] is True and created.json()["approvalTimeoutMs"] == 600_000
    session_id = api.post("/sessions", json={"agentId": "a"}).json()["id"]
    logged = api.post(
        f"/sessions/{session_id}/actions",
        json={"connector": "http", "apiName": "POST /v1/refunds", "operationType": "CREATE"},
    ).json()
    assert logged["action"]["status"] == "PENDING_APPROVAL"
    assert logged["approval"]["purpose"] == "BEFORE_EXECUTION"
    approval = api.get(f"/approvals/{logged['approval']['approvalId']}").json()
    assert 590 < approval["timeRemaining"] <= 600


def test_a_policy_that_holds_calls_must_require_approval(api: httpx.Client) -> None:
    refused = api.post("/policies", json={"name": "p", "effect": "BLOCK", "beforeExecution": True})
    assert refused.status_code == 400
    assert "only a REQUIRE_APPROVAL policy" in refused.json()["detail"]
    assert api.get("/policies").json() == []


def test_a_blocked_action_is_403_and_stored_failed(api: httpx.Client, tenant: Tenant, service: FakeService) -> None:
    api.post("/policies", json={"name": "no deletes", "effect": "BLOCK", "operationType": "DELETE"})
    session_id = api.post("/sessions", json={"agentId": "a"}).json()["id"]
    blocked = api.post(
        f"/sessions/{session_id}/actions",
        json={"connector": "http", "apiName": "DELETE /v1/orders/1", "operationType": "DELETE"},
    )
    assert blocked.status_code == 403
    assert slug(blocked) == "policy-blocked"
    assert blocked.json()["policyName"] == "no deletes"
    (action,) = api.get(f"/sessions/{session_id}").json()["actions"]
    assert action["actionId"] == blocked.json()["actionId"]
    assert action["status"] == "FAILED"
    ar = tenant.client()
    client = ar.wrap(httpx.Client(base_url=service.base_url), session_id, connector="http")
    with pytest.raises(PolicyBlockedError, match="no deletes"):
        client.delete("/v1/orders/1")
    assert service.calls() == []
    ar.close()


# bad input -----------------------------------------------------------------------------------------------

NEW_ACTION = {"connector": "http", "apiName": "POST /x", "operationType": "CREATE", "payload": {}}


def recorded(session: dict[str, Any]) -> dict[str, Any]:
    """A session as the request wrote it: without the intent checks, which the server's workers make alongside."""
    actions = [{k: v for k, v in a.items() if k != "verification"} for a in session["actions"]]
    return {k: v for k, v in session.items() if k != "verification"} | {"actions": actions}


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "expected_slug", "in_detail"),
    [
        ("POST", "/sessions", b"{not json", 400, "validation-error", "malformed"),
        ("POST", "/sessions", {"agentId": 7}, 400, "validation-error", "agentId"),
        ("POST", "/sessions", {"agentId": "a", "colour": "red"}, 400, "validation-error", "colour"),
        ("POST", "/sessions", {"intent": "no agent"}, 400, "validation-error", "agentId"),
        ("POST", "/sessions", {"agentId": "   "}, 400, "validation-error", "agent_id"),
        ("POST", "/sessions", {"agentId": "a", "sandbox": "yes"}, 400, "validation-error", "sandbox"),
        ("POST", "/sessions", b"[" + b"1," * 600_000 + b"1]", 413, "payload-too-large", ""),
        ("POST", "/sessions", {"agentId": "a", "id": "ses_chosen"}, 400, "validation-error", "(id)"),
        ("POST", "/sessions", {"agentId": "a", "id": "SES_" + "A" * 32}, 400, "validation-error", "(id)"),
        ("POST", "/sessions", {"agentId": "a", "id": "act_" + "a" * 32}, 400, "validation-error", "(id)"),
        ("GET", "/sessions?limit=0", None, 400, "validation-error", "limit"),
        ("GET", "/sessions?status=SOMEWHERE", None, 400, "validation-error", "status"),
        ("GET", "/sessions?cursor=garbage", None, 400, "validation-error", "cursor"),
        ("GET", "/sessions/ses_doesnotexist", None, 404, "not-found", "ses_doesnotexist"),
        ("GET", "/approvals/apr_nope?wait=61", None, 400, "validation-error", "wait"),
        (
            "POST",
            "/sessions/{session}/actions",
            {**NEW_ACTION, "operationType": "SMASH"},
            400,
            "validation-error",
            "operationType",
        ),
        (
            "POST",
            "/sessions/{session}/actions",
            {**NEW_ACTION, "approvalTimeoutMs": -5},
            400,
            "validation-error",
            "approvalTimeoutMs",
        ),
        ("PATCH", "/sessions/{session}/actions/act_nope", {"status": "SUCCESS"}, 404, "not-found", "act_nope"),
        ("PATCH", "/sessions/{session}/actions/{action}", {"status": "DONE"}, 400, "validation-error", "status"),
        (
            "PATCH",
            "/sessions/{session}/actions/{action}",
            {"status": "SUCCESS", "undo": {"url": "x"}},
            400,
            "validation-error",
            "undo.type",
        ),
        ("PATCH", "/sessions/{session}/actions/{done}", {"status": "SUCCESS"}, 409, "invalid-transition", "SUCCESS"),
        (
            "PATCH",
            "/sessions/{session}/actions/{action}",
            {"status": "FAILED", "response": {}},
            400,
            "validation-error",
            "FAILED",
        ),
        ("POST", "/policies", {"name": "p", "effect": "DENY"}, 400, "validation-error", "effect"),
        (
            "POST",
            "/policies",
            {"name": "p", "effect": "BLOCK", "apiName": "[unclosed"},
            400,
            "validation-error",
            "api_name",
        ),
        (
            "PUT",
            "/connectors/http",
            {"enabled": True, "config": {"allowedHosts": "everything"}},
            400,
            "validation-error",
            "allowedHosts",
        ),
        ("PUT", "/connectors/nosuch", {"enabled": True}, 400, "validation-error", "nosuch"),
        (
            "POST",
            "/sessions/{session}/actions",
            {**NEW_ACTION, "approvalTimeoutMs": 10**20},
            400,
            "validation-error",
            "approvalTimeoutMs",
        ),
        (
            "POST",
            "/sessions/{session}/rollback",
            {"approvalTimeoutMs": 10**15},
            400,
            "validation-error",
            "approvalTimeoutMs",
        ),
        ("GET", "/sessions?createdAfter=9999-12-31T23:59:59-14:00", None, 400, "validation-error", "createdAfter"),
        ("GET", "/sessions?createdBefore=0.5", None, 400, "validation-error", "createdBefore"),
        (
            "POST",
            "/policies",
            {"name": "p", "effect": "REQUIRE_APPROVAL", "beforeExecution": True, "approvalTimeoutMs": 10**30},
            400,
            "validation-error",
            "approvalTimeoutMs",
        ),
        ("GET", "/sessions?createdAfter=1700000000", None, 400, "validation-error", "createdAfter"),
        ("POST", "/sessions", b"[" * 100_000, 400, "validation-error", "nested"),
        ("POST", "/sessions", {"agentId": "a\u0000b"}, 400, "validation-error", "NUL"),
        ("GET", "/sessions/ses_%00", None, 404, "not-found", ""),
        (
            "POST",
            "/policies",
            {"name": "p", "effect": "BLOCK", "apiName": "x" * 1000},
            400,
            "validation-error",
            "api_name",
        ),
        (
            "PATCH",
            "/sessions/{session}/actions/{action}",
            {"status": "SUCCESS", "undo": {"type": "http-delete"}},
            400,
            "validation-error",
            "undo.url",
        ),
        (
            "PATCH",
            "/sessions/{session}/actions/{action}",
            {"status": "SUCCESS", "undo": {"type": "teleport", "url": "http://x/"}},
            400,
            "validation-error",
            "teleport",
        ),
        (
            "PUT",
            "/connectors/http",
            {"enabled": True, "credentials": {"headers": {"Bad Header\n": "x"}}},
            400,
            "validation-error",
            "headers",
        ),
        ("POST", "/approvals/{approval}/approve", {"reviewer": "  "}, 400, "validation-error", "reviewer"),
        ("POST", "/sessions/{session}/actions", {**NEW_ACTION, "connector": "nope"}, 400, "validation-error", "nope"),
        ("POST", "/sessions", b'{"agentId": "a", "agentId": "b"}', 400, "validation-error", "agentId"),
        (
            "POST",
            "/sessions/{session}/actions",
            b'{"connector": "http", "apiName": "POST /x", "operationType": "CREATE",'
            b' "payload": {"order": {"amount": 1, "amount": 1000}}}',
            400,
            "validation-error",
            "amount",
        ),
        ("DELETE", "/sessions", None, 405, "method-not-allowed", ""),
        ("GET", "/nowhere", None, 404, "not-found", ""),
    ],
)
def test_bad_input_gets_a_precise_4xx_problem_and_writes_nothing(
    api: httpx.Client,
    method: str,
    path: str,
    body: Any,
    status: int,
    expected_slug: str,
    in_detail: str,
) -> None:
    session_id = api.post("/sessions", json={"agentId": "a"}).json()["id"]
    logged = api.post(f"/sessions/{session_id}/actions", json=NEW_ACTION).json()["action"]["actionId"]
    done = api.post(f"/sessions/{session_id}/actions", json=NEW_ACTION).json()["action"]["actionId"]
    api.patch(f"/sessions/{session_id}/actions/{done}", json={"status": "SUCCESS"})
    held = api.post(f"/sessions/{session_id}/actions", json={**NEW_ACTION, "requiresApproval": True}).json()
    before = recorded(api.get(f"/sessions/{session_id}").json())
    url = path.format(session=session_id, action=logged, done=done, approval=held["approval"]["approvalId"])
    kwargs: dict[str, Any] = {"content": body, "headers": {"content-type": "application/json"}}
    if not isinstance(body, bytes):
        kwargs = {"json": body} if body is not None else {}
    response = api.request(method, url, **kwargs)
    assert response.status_code == status, response.text
    assert slug(response) == expected_slug
    assert in_detail in response.json()["detail"]
    assert recorded(api.get(f"/sessions/{session_id}").json()) == before
    assert len(api.get("/sessions").json()["sessions"]) == 1
    assert api.get("/policies").json() == []


@pytest.mark.parametrize(
    "content_type",
    [
        None,
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/json; charset=latin-1",
        "application/json; charset=no-such-charset",
    ],
)
def test_a_body_not_declared_as_json_in_utf8_is_refused_with_415_and_not_acted_on(
    api: httpx.Client, content_type: str | None
) -> None:
    headers = {"content-type": content_type} if content_type else {}
    response = api.post("/sessions", content=b'{"agentId": "a"}', headers=headers)
    assert response.status_code == 415, response.text
    assert slug(response) == "unsupported-media-type"
    assert "application/json" in response.json()["detail"]
    assert api.get("/sessions").json()["sessions"] == []


def test_json_with_parameters_or_a_json_suffix_is_accepted_and_a_request_without_a_body_needs_no_type(
    api: httpx.Client,
) -> None:
    for content_type in (
        "application/json; charset=utf-8",
        'application/json; charset="UTF8"',
        "Application/JSON",
        "application/merge-patch+json",
    ):
        created = api.post("/sessions", content=b'{"agentId": "a"}', headers={"content-type": content_type})
        assert created.status_code == 201, created.text
    approval_id = pending_approval(api)
    approved = api.post(f"/approvals/{approval_id}/approve")
    assert approved.status_code == 200, approved.text
    assert "content-type" not in approved.request.headers


# sessions opened while the server was unreachable: a client-chosen id -------------------------------------


def a_chosen_id() -> str:
    return f"ses_{secrets.token_hex(16)}"


def test_a_session_created_again_with_the_same_id_and_fields_is_created_once(api: httpx.Client) -> None:
    body = {"id": a_chosen_id(), "agentId": "billing", "intent": "orders"}
    first = api.post("/sessions", json=body)
    again = api.post("/sessions", json=body)
    assert first.status_code == again.status_code == 201, again.text
    assert first.json()["id"] == again.json()["id"] == body["id"]
    assert [s["id"] for s in api.get("/sessions").json()["sessions"]] == [body["id"]]


def test_a_taken_session_id_is_refused_for_another_creation_in_the_organisation(api: httpx.Client) -> None:
    session_id = a_chosen_id()
    api.post("/sessions", json={"id": session_id, "agentId": "billing", "intent": "orders"})
    other = api.post("/sessions", json={"id": session_id, "agentId": "someone else", "intent": "orders"})
    assert other.status_code == 409, other.text
    assert slug(other) == "invalid-transition" and "another random id" in other.json()["detail"]
    (kept,) = api.get("/sessions").json()["sessions"]
    assert kept["agentId"] == "billing"


def test_another_organisations_session_id_is_refused_with_the_same_answer_naming_no_id_and_handing_nothing_over(
    server: RunningServer, api: httpx.Client
) -> None:
    theirs = server.tenant()
    body = {"agentId": "billing", "intent": "orders"}
    with as_key(theirs, theirs.key) as their_api:
        their_session = their_api.post("/sessions", json={**body, "id": a_chosen_id()}).json()
        their_api.post(f"/sessions/{their_session['id']}/actions", json=NEW_ACTION)
        ours = api.post("/sessions", json={**body, "id": their_session["id"]})  # the very same creation
        taken_here = a_chosen_id()
        api.post("/sessions", json={**body, "id": taken_here})
        ours_again = api.post("/sessions", json={**body, "agentId": "x", "id": taken_here})
        assert ours.status_code == ours_again.status_code == 409, ours.text
        assert ours.json() == ours_again.json()
        assert their_session["id"] not in ours.text and "taken" not in ours.text and "exist" not in ours.text
        assert "billing" not in ours.text and "act_" not in ours.text
        assert api.get(f"/sessions/{their_session['id']}").status_code == 404
        assert len(their_api.get(f"/sessions/{their_session['id']}").json()["actions"]) == 1


def test_the_openapi_document_types_the_client_chosen_session_id(api: httpx.Client) -> None:
    schemas = api.get("/schema/openapi.json").json()["components"]["schemas"]
    (new_session,) = [s for name, s in schemas.items() if name.endswith("NewSession")]
    chosen = new_session["properties"]["id"]
    assert {"type": "string"} in chosen["oneOf"] and "id" not in new_session["required"]
    assert chosen["pattern"] == "^ses_[0-9a-f]{32}$" and "once" in chosen["description"]


# reading ---------------------------------------------------------------------------------------------------


def test_sessions_filter_and_page_by_keyset(api: httpx.Client) -> None:
    made = [api.post("/sessions", json={"agentId": f"agent-{n % 2}"}).json()["id"] for n in range(7)]
    api.post(f"/sessions/{made[0]}/complete")
    pages: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 3, **({"cursor": cursor} if cursor else {})}
        page = api.get("/sessions", params=params).json()
        pages += [s["id"] for s in page["sessions"]]
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert pages == list(reversed(made))
    by_agent = api.get("/sessions", params={"agentId": "agent-1"}).json()["sessions"]
    assert {s["id"] for s in by_agent} == set(made[1::2])
    completed = api.get("/sessions", params={"status": "COMPLETED"}).json()["sessions"]
    assert [s["id"] for s in completed] == [made[0]]
    shown = api.get("/sessions", params={"displayStatus": "ACTIVE", "limit": 2}).json()
    assert [s["id"] for s in shown["sessions"]] == [made[6], made[5]]
    later = api.get("/sessions", params={"createdAfter": "2999-01-01T00:00:00"}).json()["sessions"]
    assert later == []


def test_a_listed_session_shows_its_display_status_and_action_count_and_its_page_shows_the_actions(
    api: httpx.Client,
) -> None:
    session_id = api.post("/sessions", json={"agentId": "a", "intent": "two calls"}).json()["id"]
    for _ in range(2):
        api.post(f"/sessions/{session_id}/actions", json=NEW_ACTION)
    (listed,) = [s for s in api.get("/sessions").json()["sessions"] if s["id"] == session_id]
    whole = api.get(f"/sessions/{session_id}").json()
    assert listed == {
        "id": session_id,
        "agentId": "a",
        "intent": "two calls",
        "sandbox": False,
        "status": "ACTIVE",
        "displayStatus": "ACTIVE",
        "createdAt": whole["createdAt"],
        "lastActivityAt": whole["lastActivityAt"],
        "completedAt": None,
        "actionCount": 2,
        "recordedWith": None,
    }
    assert [a["status"] for a in whole["actions"]] == ["CLEARED", "CLEARED"]


def test_a_sessions_actions_are_read_a_page_at_a_time_in_the_order_they_were_recorded(api: httpx.Client) -> None:
    session_id = api.post("/sessions", json={"agentId": "a"}).json()["id"]
    for _ in range(45):
        api.post(f"/sessions/{session_id}/actions", json=NEW_ACTION)
    pages: list[list[dict[str, Any]]] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 20, **({"cursor": cursor} if cursor else {})}
        page = api.get(f"/sessions/{session_id}/actions", params=params).json()
        pages.append(page["actions"])
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert [len(p) for p in pages] == [20, 20, 5]
    read = [a for p in pages for a in p]
    assert [a["seq"] for a in read] == list(range(1, 46))
    assert read == api.get(f"/sessions/{session_id}").json()["actions"]


def test_a_long_sessions_read_shows_its_first_hundred_actions_and_where_the_rest_start(api: httpx.Client) -> None:
    session_id = api.post("/sessions", json={"agentId": "a"}).json()["id"]
    for _ in range(130):
        api.post(f"/sessions/{session_id}/actions", json=NEW_ACTION)
    api.post(f"/sessions/{session_id}/actions", json={**NEW_ACTION, "requiresApproval": True})
    whole = api.get(f"/sessions/{session_id}").json()
    assert [a["seq"] for a in whole["actions"]] == list(range(1, 101))
    assert whole["actionCount"] == 131 and whole["displayStatus"] == "AWAITING_APPROVAL"
    assert len(whole["approvals"]) == 1
    rest = api.get(f"/sessions/{session_id}/actions", params={"cursor": whole["actionsCursor"]}).json()
    assert [a["seq"] for a in rest["actions"]] == list(range(101, 132)) and rest["nextCursor"] is None
    (listed,) = [s for s in api.get("/sessions").json()["sessions"] if s["id"] == session_id]
    assert listed == {k: v for k, v in whole.items() if k in listed}


def test_a_short_sessions_read_has_every_action_and_no_cursor(api: httpx.Client) -> None:
    session_id = api.post("/sessions", json={"agentId": "a"}).json()["id"]
    for _ in range(100):
        api.post(f"/sessions/{session_id}/actions", json=NEW_ACTION)
    whole = api.get(f"/sessions/{session_id}").json()
    assert len(whole["actions"]) == whole["actionCount"] == 100 and whole["actionsCursor"] is None


def test_a_page_of_actions_ending_the_session_exactly_says_the_next_is_empty(api: httpx.Client) -> None:
    session_id = api.post("/sessions", json={"agentId": "a"}).json()["id"]
    for _ in range(2):
        api.post(f"/sessions/{session_id}/actions", json=NEW_ACTION)
    first = api.get(f"/sessions/{session_id}/actions", params={"limit": 2}).json()
    assert [a["seq"] for a in first["actions"]] == [1, 2]
    last = api.get(f"/sessions/{session_id}/actions", params={"cursor": first["nextCursor"]}).json()
    assert last == {"actions": [], "nextCursor": None}


def test_a_cursor_the_action_list_did_not_give_out_is_refused_with_a_problem(api: httpx.Client) -> None:
    session_id = api.post("/sessions", json={"agentId": "a"}).json()["id"]
    sessions_cursor = base64.urlsafe_b64encode(json.dumps([0]).encode()).decode().rstrip("=")
    answer = api.get(f"/sessions/{session_id}/actions", params={"cursor": sessions_cursor})
    assert answer.status_code == 400 and slug(answer) == "validation-error"
    assert "cursor" in answer.json()["detail"]


@pytest.mark.parametrize("key", ["a b", "k" * 94, "sk_live_" + "a" * 24])
def test_a_write_ahead_key_the_server_cannot_keep_is_refused_with_a_problem_and_nothing_recorded(
    api: httpx.Client, key: str
) -> None:
    session_id = api.post("/sessions", json={"agentId": "a"}).json()["id"]
    answer = api.post(f"/sessions/{session_id}/actions", json={**NEW_ACTION, "idempotencyKey": key})
    assert answer.status_code == 400 and slug(answer) == "validation-error"
    assert "idempotency_key" in answer.json()["detail"]
    assert api.get(f"/sessions/{session_id}/actions").json()["actions"] == []


def test_another_organisations_session_has_no_actions_to_page_through(server: RunningServer, api: httpx.Client) -> None:
    session_id = api.post("/sessions", json={"agentId": "a"}).json()["id"]
    api.post(f"/sessions/{session_id}/actions", json=NEW_ACTION)
    with httpx.Client(base_url=server.url, headers={"authorization": f"Bearer {server.tenant().key}"}) as theirs:
        assert theirs.get(f"/sessions/{session_id}/actions").status_code == 404


def test_a_display_status_filter_fills_its_pages_however_many_other_sessions_lie_between(
    server: RunningServer, tenant: Tenant, api: httpx.Client
) -> None:
    def awaiting_approval() -> str:
        session_id = api.post("/sessions", json={"agentId": "a"}).json()["id"]
        api.post(f"/sessions/{session_id}/actions", json={**NEW_ACTION, "requiresApproval": True})
        return session_id

    oldest = awaiting_approval()
    with server.engine.store.transaction() as tx:  # more ACTIVE sessions than a page of the list reads in all
        for _ in range(2_100):
            now = utcnow()
            tx.insert(Session(new_id("ses"), tenant.org_id, "b", "", False, SessionStatus.ACTIVE, now, now), last_seq=0)
    newest = awaiting_approval()
    params = {"displayStatus": "AWAITING_APPROVAL", "limit": 2}
    first = api.get("/sessions", params=params).json()
    assert [s["id"] for s in first["sessions"]] == [newest, oldest]
    last = api.get("/sessions", params={**params, "cursor": first["nextCursor"]}).json()
    assert last == {"sessions": [], "nextCursor": None}


def test_the_approval_list_answers_a_page_at_a_time_and_links_the_next(api: httpx.Client) -> None:
    session_id = api.post("/sessions", json={"agentId": "a"}).json()["id"]
    for _ in range(3):
        api.post(f"/sessions/{session_id}/actions", json={**NEW_ACTION, "requiresApproval": True})
    everything = [p["approvalId"] for p in api.get("/approvals", params={"status": "PENDING"}).json()]
    first = api.get("/approvals", params={"status": "PENDING", "limit": 2})
    assert [p["approvalId"] for p in first.json()] == everything[:2]
    last = api.get(first.links["next"]["url"])
    assert [p["approvalId"] for p in last.json()] == everything[2:]
    assert "link" not in last.headers and len(everything) == 3


def position_of(cursor: str) -> list[Any]:
    parts: list[Any] = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    return parts


def cursor_of(parts: list[Any], **dumps: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(parts, **dumps).encode()).decode().rstrip("=")


#: Ways to change a cursor a listing gave out (a position: maybe a rank, then a moment and an id), none of
#: which a listing makes.
TAMPERED: dict[str, Callable[[list[Any]], str]] = {
    "an integer beyond 64 bits": lambda p: cursor_of([2**64, *p[1:]]),
    "a lone surrogate": lambda p: cursor_of([*p[:-1], "\ud800"]),
    "a moment without a zone": lambda p: cursor_of([*p[:-2], p[-2].removesuffix("+00:00"), p[-1]]),
    "a moment in another zone": lambda p: cursor_of([*p[:-2], "0001-01-01T00:00:00+05:00", p[-1]]),
    "an id of another kind": lambda p: cursor_of([*p[:-1], "act_" + p[-1][4:]]),
    "the same position spaced otherwise": lambda p: cursor_of(p, separators=(",", ":")),
    "characters outside base64": lambda p: cursor_of(p)[:8] + "!!!!" + cursor_of(p)[8:],
}


@pytest.mark.parametrize("change", TAMPERED.values(), ids=TAMPERED.keys())
@pytest.mark.parametrize("listing", ["/sessions", "/approvals"])
def test_a_cursor_the_server_did_not_make_is_refused_with_400(
    api: httpx.Client, listing: str, change: Callable[[list[Any]], str]
) -> None:
    session_id = api.post("/sessions", json={"agentId": "a"}).json()["id"]
    for _ in range(2):
        api.post(f"/sessions/{session_id}/actions", json={**NEW_ACTION, "requiresApproval": True})
    api.post("/sessions", json={"agentId": "a"})
    first = api.get(listing, params={"limit": 1})
    if listing == "/sessions":
        made: str = first.json()["nextCursor"]
    else:
        (made,) = parse_qs(urlsplit(first.links["next"]["url"]).query)["cursor"]
    assert api.get(listing, params={"cursor": made}).status_code == 200
    refused = api.get(listing, params={"cursor": change(position_of(made))})
    assert refused.status_code == 400, refused.text
    assert slug(refused) == "validation-error" and "cursor" in refused.json()["detail"]


def test_the_approval_list_has_exactly_the_status_reference_fields(api: httpx.Client) -> None:
    session_id = api.post("/sessions", json={"agentId": "a"}).json()["id"]
    api.post(f"/sessions/{session_id}/actions", json={**NEW_ACTION, "requiresApproval": True})
    (listed,) = api.get("/approvals").json()
    assert list(listed) == [
        "approvalId",
        "actionId",
        "apiName",
        "operationType",
        "sessionId",
        "agentId",
        "payloadSummary",
        "requestedAt",
        "timeoutAt",
        "timeRemaining",
        "status",
        "resolvedAt",
        "resolvedBy",
        "reason",
        "actionStatus",
        "unconfirmed",
    ]
    assert listed["status"] == "PENDING" and listed["actionStatus"] == "PENDING_APPROVAL"
    assert 0 < listed["timeRemaining"] <= 24 * 3600
    assert api.get(f"/approvals/{listed['approvalId']}").json()["purpose"] == "BEFORE_EXECUTION"


def test_the_approval_list_adds_what_deciding_does_when_asked(api: httpx.Client) -> None:
    session_id = api.post("/sessions", json={"agentId": "a"}).json()["id"]
    held = {**NEW_ACTION, "payload": {"method": "POST", "url": "https://api.example.com/v1/orders"}}
    api.post(f"/sessions/{session_id}/actions", json={**held, "requiresApproval": True})
    (listed,) = api.get("/approvals", params={"include": ["description", "consequences"]}).json()
    assert list(listed)[-2:] == ["description", "consequences"]
    assert listed["description"] == "Create order on api.example.com"
    assert set(listed["consequences"]) == {"approve", "reject"}
    assert listed["consequences"]["approve"] == {
        "summary": "The agent's call runs. It can be undone later: "
        "Delete what it creates (a DELETE of the answer's Location, or of the path and its id).",
        "steps": [],
        "irreversible": False,
        "moreSteps": 0,
    }
    shown = api.get(f"/approvals/{listed['approvalId']}").json()
    assert (shown["targetHost"], shown["outcome"]) == ("api.example.com", None)
    refused = api.get("/approvals", params={"include": "everything"})
    assert refused.status_code == 400 and "include" in refused.json()["detail"]


def test_openapi_schema_health_and_metrics_are_served(api: httpx.Client) -> None:
    schema_doc = api.get("/schema/openapi.json").json()
    assert schema_doc["openapi"].startswith("3.1")
    assert {"/sessions", "/sessions/{session_id}/actions", "/approvals/{approval_id}"} <= set(schema_doc["paths"])
    assert "text/html" in api.get("/schema").headers["content-type"]
    assert httpx.get(f"{api.base_url}/healthz").json()["status"] == "ok"
    session_id = api.post("/sessions", json={"agentId": "a"}).json()["id"]
    api.post(f"/sessions/{session_id}/actions", json=NEW_ACTION)
    text = httpx.get(f"{api.base_url}/metrics").text
    assert 'agentrein_actions_logged_total{status="CLEARED"}' in text
    assert "agentrein_approvals_pending" in text and "agentrein_actions_unconfirmed" in text
    assert 'agentrein_requests_total{app_name="agentrein",method="POST",path="/sessions"' in text


def test_options_on_a_path_allows_every_method_the_openapi_document_lists_for_it(api: httpx.Client) -> None:
    paths = api.get("/schema/openapi.json").json()["paths"]
    allowed = {
        path: api.options(re.sub(r"\{(\w+)\}", r"\1", path)).headers.get("allow", "").split(", ") for path in paths
    }
    assert {path: sorted(allowed[path]) for path in paths} == {
        path: sorted([method.upper() for method in item] + ["OPTIONS"]) for path, item in paths.items()
    }


def test_the_openapi_document_answers_415_exactly_where_an_operation_takes_a_json_body(api: httpx.Client) -> None:
    operations = [
        (f"{method} {path}", operation)
        for path, item in api.get("/schema/openapi.json").json()["paths"].items()
        if not path.startswith("/dashboard")
        for method, operation in item.items()
    ]
    with_body = {name for name, operation in operations if "requestBody" in operation}
    assert "post /sessions/{session_id}/rollback" in with_body
    documented = {
        name for name, operation in operations if PROBLEM in operation["responses"].get("415", {}).get("content", {})
    }
    assert documented == with_body


def test_metrics_without_a_scrape_token_set_refuse_a_client_that_is_not_loopback(api: httpx.Client) -> None:
    # uvicorn takes X-Forwarded-For from a loopback proxy: this is how a scraper from elsewhere arrives
    forwarded = httpx.get(f"{api.base_url}/metrics", headers={"X-Forwarded-For": "203.0.113.7"})
    assert forwarded.status_code == 403, forwarded.text
    assert slug(forwarded) == "forbidden" and "AGENTREIN_METRICS_TOKEN" in forwarded.json()["detail"]
    assert "agentrein_approvals_pending" not in forwarded.text


@pytest.mark.parametrize("authorization", [None, "Bearer wrong-token", "Basic c2NyYXBlLXRva2Vu"])
def test_metrics_with_a_scrape_token_set_refuse_a_scraper_without_it_even_on_loopback(
    api: httpx.Client, monkeypatch: pytest.MonkeyPatch, authorization: str | None
) -> None:
    monkeypatch.setenv("AGENTREIN_METRICS_TOKEN", "scrape-token")
    headers = {"Authorization": authorization} if authorization else {}
    refused = httpx.get(f"{api.base_url}/metrics", headers=headers)
    assert refused.status_code == 401, refused.text
    assert slug(refused) == "unauthorized" and "agentrein_approvals_pending" not in refused.text


def test_metrics_with_a_scrape_token_set_answer_a_scraper_holding_it_from_anywhere(
    api: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTREIN_METRICS_TOKEN", "scrape-token")
    headers = {"Authorization": "Bearer scrape-token", "X-Forwarded-For": "203.0.113.7"}
    scraped = httpx.get(f"{api.base_url}/metrics", headers=headers)
    assert scraped.status_code == 200, scraped.text
    assert "agentrein_approvals_pending" in scraped.text


# approvals: long-poll and races ----------------------------------------------------------------------------


def pending_approval(api: httpx.Client) -> str:
    session_id = api.post("/sessions", json={"agentId": "a"}).json()["id"]
    logged = api.post(f"/sessions/{session_id}/actions", json={**NEW_ACTION, "requiresApproval": True}).json()
    return str(logged["approval"]["approvalId"])


def test_a_long_poll_answers_as_soon_as_the_approval_is_decided(api: httpx.Client, tenant: Tenant) -> None:
    approval_id = pending_approval(api)
    answers: list[tuple[float, dict[str, Any]]] = []

    def wait() -> None:
        with as_key(tenant, tenant.key) as waiter:
            got = waiter.get(f"/approvals/{approval_id}", params={"wait": 30}, timeout=60).json()
        answers.append((time.monotonic(), got))

    waiting = threading.Thread(target=wait)
    waiting.start()
    time.sleep(0.3)
    decided_at = time.monotonic()
    api.post(f"/approvals/{approval_id}/approve", json={"reviewer": "lead"})
    waiting.join(timeout=30)
    ((answered_at, answer),) = answers
    assert answer["status"] == "APPROVED" and answer["resolvedBy"] == "lead (operator key " + tenant.key[:10] + "…)"
    assert answered_at - decided_at < 10  # woken by the decision, long before the 30 s wait ran out


def test_a_held_call_reported_failed_closes_its_approval_and_approving_it_says_why(api: httpx.Client) -> None:
    session_id = api.post("/sessions", json={"agentId": "a"}).json()["id"]
    held = api.post(f"/sessions/{session_id}/actions", json={**NEW_ACTION, "requiresApproval": True}).json()
    approval_id, action_id = held["approval"]["approvalId"], held["action"]["actionId"]
    failed = api.patch(f"/sessions/{session_id}/actions/{action_id}", json={"status": "FAILED", "error": "gave up"})
    assert failed.status_code == 200 and failed.json()["status"] == "FAILED"
    assert api.get("/approvals", params={"status": "PENDING"}).json() == []
    closed = api.get(f"/approvals/{approval_id}").json()
    assert (closed["status"], closed["reason"]) == ("REJECTED", "the action failed before a decision")
    approved = api.post(f"/approvals/{approval_id}/approve", json={})
    assert approved.status_code == 409 and slug(approved) == "invalid-transition"
    assert "the action failed before a decision" in approved.json()["detail"]
    assert api.get(f"/sessions/{session_id}").json()["displayStatus"] == "FAILED"


def test_a_failure_reported_with_an_error_longer_than_a_record_keeps_is_recorded_with_its_start(
    api: httpx.Client,
) -> None:
    session_id = api.post("/sessions", json={"agentId": "a"}).json()["id"]
    action_id = api.post(f"/sessions/{session_id}/actions", json=NEW_ACTION).json()["action"]["actionId"]
    error = "the service said: " + "x" * 20_000
    failed = api.patch(f"/sessions/{session_id}/actions/{action_id}", json={"status": "FAILED", "error": error})
    assert failed.status_code == 200, failed.text
    assert failed.json()["error"] == error[:10_000]


def test_a_long_poll_returns_the_pending_approval_when_the_wait_runs_out(api: httpx.Client) -> None:
    approval_id = pending_approval(api)
    assert api.get(f"/approvals/{approval_id}", params={"wait": 0.2}).json()["status"] == "PENDING"


def test_two_reviewers_deciding_at_once_exactly_one_wins(
    server: RunningServer, api: httpx.Client, tenant: Tenant
) -> None:
    def decide(approval_id: str, verb: str, key: str, barrier: threading.Barrier, outcomes: dict[str, int]) -> None:
        with as_key(tenant, key) as reviewer:
            barrier.wait()
            outcomes[verb] = reviewer.post(f"/approvals/{approval_id}/{verb}", json={"reviewer": verb}).status_code

    for _ in range(5):
        approval_id = pending_approval(api)
        barrier = threading.Barrier(2)
        outcomes: dict[str, int] = {}
        threads = [
            threading.Thread(
                target=decide, args=(approval_id, verb, server.key(tenant, Role.OPERATOR), barrier, outcomes)
            )
            for verb in ("approve", "reject")
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(outcomes.values()) == [200, 409]
        winner = next(verb for verb, code in outcomes.items() if code == 200)
        decided = api.get(f"/approvals/{approval_id}").json()
        assert decided["resolvedBy"].startswith(f"{winner} (operator key ar_")
        assert decided["status"] == ("APPROVED" if winner == "approve" else "REJECTED")


# connectors and server-side undo ------------------------------------------------------------------------


def test_connector_credentials_are_encrypted_at_rest_used_for_undo_and_never_returned(
    server: RunningServer, api: httpx.Client, tenant: Tenant, service: FakeService
) -> None:
    settings = {
        "enabled": True,
        "config": {"allowedHosts": ["127.0.0.1"]},
        "credentials": {"headers": {"Authorization": "Bearer sk_live_s3cret"}},
    }
    shown = api.put("/connectors/http", json=settings)
    assert shown.status_code == 200, shown.text
    for response in (shown, api.get("/connectors/http"), api.get("/connectors")):
        assert "s3cret" not in response.text
    assert api.get("/connectors/http").json()["hasCredentials"] is True
    table = schema.connector_configs
    with server.engine.store.engine.connect() as conn:
        stored = conn.execute(sa.select(table.c.credentials).where(table.c.org_id == tenant.org_id)).scalar_one()
    assert "s3cret" not in stored
    session_id, order_id = session_with_a_created_order(api, service)
    assert rolled_back(api, session_id)["displayStatus"] == "REVERTED"
    (undo,) = service.calls("DELETE")
    assert undo.authorization == "Bearer sk_live_s3cret"
    assert order_id not in service.collection("orders")


def test_an_undo_to_a_host_not_allowed_is_refused(api: httpx.Client, service: FakeService) -> None:
    api.put("/connectors/http", json={"enabled": True, "config": {"allowedHosts": ["api.example.com"]}})
    session_id, order_id = session_with_a_created_order(api, service)
    session = rolled_back(api, session_id)
    (action,) = session["actions"]
    assert action["status"] == ActionStatus.ROLLBACK_FAILED
    assert action["undoStatus"] == UndoStatus.FAILED
    assert "allowedHosts" in action["error"] and "127.0.0.1" in action["error"]
    assert session["displayStatus"] == "ROLLBACK_FAILED"
    assert service.calls("DELETE") == []
    assert order_id in service.collection("orders")


def test_an_undo_through_a_connector_not_enabled_fails_clearly(api: httpx.Client, service: FakeService) -> None:
    api.put("/connectors/http", json={"enabled": False})
    session_id, order_id = session_with_a_created_order(api, service)
    (action,) = rolled_back(api, session_id)["actions"]
    assert action["status"] == ActionStatus.ROLLBACK_FAILED
    assert "not enabled" in action["error"] and "PUT /connectors/http" in action["error"]
    assert order_id in service.collection("orders")


def test_requests_keep_being_served_while_many_long_polls_wait(api: httpx.Client, tenant: Tenant) -> None:
    approval_id = pending_approval(api)
    waiting = [
        threading.Thread(
            target=lambda: as_key(tenant, tenant.key).get(f"/approvals/{approval_id}", params={"wait": 8}, timeout=30)
        )
        for _ in range(12)
    ]
    for thread in waiting:
        thread.start()
    time.sleep(0.5)
    started = time.monotonic()
    assert api.get("/sessions").status_code == 200
    assert time.monotonic() - started < 4  # answered while the 8 s long-polls still wait
    for thread in waiting:
        thread.join()


def test_an_agent_cannot_roll_back_a_completed_session_by_reporting_a_failure(
    server: RunningServer, api: httpx.Client, tenant: Tenant, service: FakeService
) -> None:
    with as_key(tenant, server.key(tenant, Role.AGENT)) as agent:
        session_id, order_id = session_with_a_created_order(agent, service)
        late = agent.post(f"/sessions/{session_id}/actions", json=NEW_ACTION).json()["action"]["actionId"]
        agent.post(f"/sessions/{session_id}/complete")
        journaled = {**NEW_ACTION, "idempotencyKey": "agentrein-journal-1", "status": "FAILED", "error": "boom"}
        assert agent.post(f"/sessions/{session_id}/journal", json=journaled).status_code == 201
        assert agent.patch(f"/sessions/{session_id}/actions/{late}", json={"status": "FAILED"}).status_code == 200
        logging_failed = agent.post(f"/sessions/{session_id}/fail", json={"reason": "action logging failed"})
        assert logging_failed.status_code == 200, logging_failed.text
    time.sleep(0.5)  # the workers would have started on a rollback by now
    session = api.get(f"/sessions/{session_id}").json()
    assert session["status"] == "COMPLETED"
    assert api.get(f"/sessions/{session_id}/rollback").status_code == 404
    assert order_id in service.collection("orders")


def failure_reported(
    server: RunningServer, api: httpx.Client, tenant: Tenant, service: FakeService, reason: str
) -> tuple[str, str, dict[str, Any]]:
    """An agent's session that created an order, then reported with ``reason`` that action logging failed: its
    id, the order's, and the rollback the report set off, once it ended."""
    with as_key(tenant, server.key(tenant, Role.AGENT)) as agent:
        session_id, order_id = session_with_a_created_order(agent, service)
        reported = agent.post(f"/sessions/{session_id}/fail", json={"reason": reason, "connector": "http"})
    assert reported.status_code == 200, reported.text
    return session_id, order_id, api.get(f"/sessions/{session_id}/rollback", params={"wait": 30}).json()


def test_an_agents_report_that_action_logging_failed_rolls_its_active_session_back(
    server: RunningServer, api: httpx.Client, tenant: Tenant, service: FakeService
) -> None:
    reason = "action logging failed: a token=abc123 in the api name"
    session_id, order_id, job = failure_reported(server, api, tenant, service, reason)
    assert job["status"] == "SUCCEEDED" and job["trigger"].startswith("action logging failed")
    assert "abc123" not in job["trigger"]
    assert api.get(f"/sessions/{session_id}").json()["displayStatus"] == "REVERTED"
    assert order_id not in service.collection("orders")


def test_a_failure_reported_with_a_reason_of_any_length_still_rolls_the_session_back(
    server: RunningServer, api: httpx.Client, tenant: Tenant, service: FakeService
) -> None:
    reason = "action logging failed: " + "x" * 20_000 + " token=abc123"
    _, order_id, job = failure_reported(server, api, tenant, service, reason)
    assert job["status"] == "SUCCEEDED" and job["trigger"].startswith("action logging failed: xxx")
    assert order_id not in service.collection("orders")


def test_a_server_side_undo_may_not_use_a_method_the_organisation_did_not_allow(
    api: httpx.Client, service: FakeService
) -> None:
    session_id = api.post("/sessions", json={"agentId": "a"}).json()["id"]
    action_id = api.post(f"/sessions/{session_id}/actions", json=NEW_ACTION).json()["action"]["actionId"]
    undo = {
        "type": "http-request",
        "method": "POST",
        "url": f"{service.base_url}/v1/transfers",
        "json": {"amount": 10**6},
    }
    assert (
        api.patch(f"/sessions/{session_id}/actions/{action_id}", json={"status": "SUCCESS", "undo": undo}).status_code
        == 200
    )
    (action,) = rolled_back(api, session_id)["actions"]
    assert action["status"] == "ROLLBACK_FAILED" and "allowedMethods" in action["error"]
    assert service.calls() == []


def test_concurrent_writes_of_one_record_never_fail_with_a_server_error(api: httpx.Client, tenant: Tenant) -> None:
    session_id = api.post("/sessions", json={"agentId": "a"}).json()["id"]
    journaled = {**NEW_ACTION, "idempotencyKey": "agentrein-journal-race", "status": "SUCCESS"}
    codes: list[int] = []

    def write(n: int) -> None:
        with as_key(tenant, tenant.key) as client:
            if n % 2:
                codes.append(client.post(f"/sessions/{session_id}/journal", json=journaled).status_code)
            else:
                codes.append(client.put("/connectors/http", json={"enabled": True, "config": {}}).status_code)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert set(codes) <= {200, 201, 409}, codes
    assert len(api.get(f"/sessions/{session_id}").json()["actions"]) == 1


def test_a_revoked_key_stops_working(server: RunningServer, api: httpx.Client, tenant: Tenant) -> None:
    created = api.post("/api-keys", json={"role": "agent"}).json()
    with as_key(tenant, created["key"]) as agent:
        assert agent.get("/sessions").status_code == 200
        assert api.delete(f"/api-keys/{created['keyId']}").status_code == 204
        assert agent.get("/sessions").status_code == 401
    assert [k["revokedAt"] is not None for k in api.get("/api-keys").json() if k["keyId"] == created["keyId"]] == [True]

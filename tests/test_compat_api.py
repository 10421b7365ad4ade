"""The compatible API (``/compat``) over real HTTP, route by route: what each answers, how it lands on the
engine's use cases (read back through the native API), and the refusals, as problem+json with a ``detail``."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from dashboard import account, visitor
from serving import RunningServer, Tenant

from agentrein_core.commands import NewPolicy
from agentrein_core.statuses import Role, UserRole
from agentrein_core.store import schema
from agentrein_server.compat.calls import CAPTURE_FAILED, PRECAPTURE_OTHER_CALL, PRECAPTURE_UNKNOWN
from agentrein_server.compat.routes import PRECAPTURE_FAILED
from agentrein_server.compat.tokens import Tokens
from agentrein_stripe import StripeConnector
from agentrein_testing import FakeStripe


@pytest.fixture
def tenant(server: RunningServer) -> Tenant:
    return server.tenant()


@pytest.fixture
def native(tenant: Tenant) -> Iterator[httpx.Client]:
    """The native API with the organisation's operator key."""
    with tenant.native() as api:
        yield api


def token_of(server: RunningServer, key: str) -> str:
    answer = httpx.post(f"{server.url}/compat/auth/token", json={"apiKey": key})
    assert answer.status_code == 200, answer.text
    token: str = answer.json()["data"]["token"]
    return token


@pytest.fixture
def agent_key(server: RunningServer, tenant: Tenant) -> str:
    return server.key(tenant, Role.AGENT)


@pytest.fixture
def compat(server: RunningServer, agent_key: str) -> Iterator[httpx.Client]:
    """The compatible API as the published SDKs call it: with the token of an agent key."""
    headers = {"Authorization": f"Bearer {token_of(server, agent_key)}", "User-Agent": "python-httpx/0.29.0"}
    with httpx.Client(base_url=f"{server.url}/compat", headers=headers, timeout=60) as api:
        yield api


def problem(answer: httpx.Response, status: int) -> dict[str, Any]:
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = answer.json()
    assert body["detail"]
    return body


def slug(body: dict[str, Any]) -> str:
    """The problem type as the published SDKs read it: the last segment of its URL."""
    return str(body["type"]).rstrip("/").split("/")[-1]


def open_session(compat: httpx.Client) -> str:
    answer = compat.post("/sessions", json={"agentId": "billing-agent", "intent": "onboard a customer"})
    assert answer.status_code == 200, answer.text
    session_id: str = answer.json()["data"]["id"]
    return session_id


def log(compat: httpx.Client, session_id: str, **body: Any) -> httpx.Response:
    return compat.post(f"/sessions/{session_id}/actions", json={"operationType": "CREATE", **body})


CREATED = {"id": "cus_Compat1", "object": "customer", "email": "ada@example.com"}


def log_customer_created(compat: httpx.Client, session_id: str) -> httpx.Response:
    """The log the Python SDK sends after ``client.customers.create(params={})`` returned :data:`CREATED`."""
    return log(
        compat,
        session_id,
        apiName="stripe.customers.create",
        payload={"params": {}},
        response=CREATED,
        status="SUCCESS",
    )


# tokens ---------------------------------------------------------------------------------------------------------------
def test_an_agent_key_is_exchanged_for_a_token_wrapped_in_data(server: RunningServer, agent_key: str) -> None:
    answer = httpx.post(f"{server.url}/compat/auth/token", json={"apiKey": agent_key})
    assert answer.status_code == 200
    assert answer.json()["data"]["token"].startswith("art_")


def test_an_operator_key_gets_no_token(server: RunningServer, tenant: Tenant) -> None:
    answer = httpx.post(f"{server.url}/compat/auth/token", json={"apiKey": tenant.key})
    assert "agent key" in problem(answer, 403)["detail"]


def test_an_unknown_key_gets_no_token(server: RunningServer) -> None:
    answer = httpx.post(f"{server.url}/compat/auth/token", json={"apiKey": "ar_not-a-key-of-this-server"})
    assert slug(problem(answer, 401)) == "unauthorized"


def test_a_token_is_refused_on_the_native_api(server: RunningServer, agent_key: str) -> None:
    headers = {"Authorization": f"Bearer {token_of(server, agent_key)}"}
    answer = httpx.get(f"{server.url}/sessions", headers=headers)
    assert "/compat" in problem(answer, 401)["detail"]


def test_an_api_key_is_refused_on_the_compat_routes(server: RunningServer, agent_key: str) -> None:
    answer = httpx.post(
        f"{server.url}/compat/sessions", json={"agentId": "a"}, headers={"Authorization": f"Bearer {agent_key}"}
    )
    assert "POST /compat/auth/token" in problem(answer, 401)["detail"]


def test_a_token_stops_working_once_its_key_is_revoked(
    server: RunningServer, tenant: Tenant, agent_key: str, compat: httpx.Client
) -> None:
    key_id = next(
        k.key_id for k in server.engine.accounts.list_api_keys(tenant.org_id) if agent_key.startswith(k.prefix)
    )
    server.services.revoke_api_key(tenant.org_id, key_id)
    assert "revoked" in problem(compat.post("/sessions", json={"agentId": "a"}), 401)["detail"]


def test_a_token_signed_under_another_secret_key_is_refused(server: RunningServer, tenant: Tenant) -> None:
    from cryptography.fernet import Fernet

    from agentrein_core.vault import Vault

    key, _ = server.engine.accounts.create_api_key(tenant.org_id, Role.AGENT)
    forged = Tokens(Vault(Fernet.generate_key())).issue(key)
    answer = httpx.get(f"{server.url}/compat/sessions/ses_x", headers={"Authorization": f"Bearer {forged}"})
    assert "not one this server issued" in problem(answer, 401)["detail"]


def test_an_expired_token_is_refused(server: RunningServer, tenant: Tenant) -> None:
    key, _ = server.engine.accounts.create_api_key(tenant.org_id, Role.AGENT)
    old = Tokens(server.services.vault).issue(key, now=0.0)
    answer = httpx.get(f"{server.url}/compat/sessions/ses_x", headers={"Authorization": f"Bearer {old}"})
    assert "expired" in problem(answer, 401)["detail"]


# sessions -------------------------------------------------------------------------------------------------------------
def test_a_session_opened_through_compat_is_an_ordinary_session_marked_with_the_sdk(
    compat: httpx.Client, native: httpx.Client, tenant: Tenant
) -> None:
    opened = compat.post("/sessions", json={"agentId": "billing-agent", "intent": None}).json()["data"]
    assert opened["organizationId"] == tenant.org_id
    assert (opened["agentId"], opened["status"], opened["isSandbox"]) == ("billing-agent", "ACTIVE", False)
    assert opened["createdAt"] and opened["updatedAt"]
    listed = native.get("/sessions").json()["sessions"]
    assert [(s["id"], s["recordedWith"]) for s in listed] == [(opened["id"], "published SDK (Python)")]


def test_the_dashboards_session_page_says_which_sdk_recorded_the_session(
    server: RunningServer, tenant: Tenant, compat: httpx.Client
) -> None:
    session_id = open_session(compat)
    with visitor(server, account(server, tenant, UserRole.REVIEWER)) as reviewer:
        page = reviewer.get(f"/dashboard/sessions/{session_id}").text
    assert "<dt>Recorded by</dt><dd>published SDK (Python), through the compatible API</dd>" in page


def test_a_session_is_read_back_wrapped_in_data(compat: httpx.Client) -> None:
    session_id = open_session(compat)
    shown = compat.get(f"/sessions/{session_id}").json()["data"]
    assert (shown["id"], shown["intent"], shown["status"]) == (session_id, "onboard a customer", "ACTIVE")


def test_a_session_another_agent_key_opened_is_not_found(
    server: RunningServer, tenant: Tenant, compat: httpx.Client
) -> None:
    session_id = open_session(compat)
    other = {"Authorization": f"Bearer {token_of(server, server.key(tenant, Role.AGENT))}"}
    problem(httpx.get(f"{server.url}/compat/sessions/{session_id}", headers=other), 404)


def test_patching_a_session_completed_completes_it(compat: httpx.Client) -> None:
    session_id = open_session(compat)
    answer = compat.patch(f"/sessions/{session_id}", json={"status": "COMPLETED"})
    assert answer.json()["data"]["status"] == "COMPLETED"


def test_patching_a_session_to_another_status_is_refused_naming_the_one_allowed(compat: httpx.Client) -> None:
    session_id = open_session(compat)
    body = problem(compat.patch(f"/sessions/{session_id}", json={"status": "FAILED"}), 400)
    assert "COMPLETED" in body["detail"]


def test_a_rollback_request_starts_the_sessions_rollback(compat: httpx.Client, native: httpx.Client) -> None:
    session_id = open_session(compat)
    log_customer_created(compat, session_id)
    started = compat.post(f"/sessions/{session_id}/rollback", json={})
    assert started.json()["data"]["sessionId"] == session_id
    assert native.get(f"/sessions/{session_id}/rollback").json()["rollbackId"] == started.json()["data"]["id"]


# actions --------------------------------------------------------------------------------------------------------------
def test_a_logged_customer_create_is_recorded_as_a_call_that_ran_with_the_undo_its_connector_derives(
    compat: httpx.Client, native: httpx.Client
) -> None:
    session_id = open_session(compat)
    payload = {"params": {"email": "ada@example.com"}}
    answer = log(
        compat, session_id, apiName="stripe.v1.customers.create", payload=payload, response=CREATED, status="SUCCESS"
    )
    assert answer.status_code == 200, answer.text
    (action,) = native.get(f"/sessions/{session_id}").json()["actions"]
    assert action["actionId"] == answer.json()["data"]["id"]
    assert (action["connector"], action["apiName"], action["status"]) == ("stripe", "customers.create", "SUCCESS")
    assert action["idempotencyKey"].startswith("compat-")
    assert action["undo"] == {
        "type": "stripe-delete",
        "resource": "customers",
        "id": "cus_Compat1",
        "requireApproval": False,
    }


def test_the_stripe_modules_path_is_recorded_under_the_same_api_name(
    compat: httpx.Client, native: httpx.Client
) -> None:
    session_id = open_session(compat)
    log(
        compat,
        session_id,
        apiName="stripe.Customer.create",
        payload={"email": "a@example.com"},
        response=CREATED,
        status="SUCCESS",
    )
    (action,) = native.get(f"/sessions/{session_id}").json()["actions"]
    assert action["apiName"] == "customers.create"
    assert action["payload"] == {"params": {"email": "a@example.com"}}
    assert action["undo"]["id"] == "cus_Compat1"


def test_a_successful_read_is_not_recorded(compat: httpx.Client, native: httpx.Client) -> None:
    session_id = open_session(compat)
    answer = log(
        compat, session_id, apiName="stripe.customers.retrieve", payload="cus_1", response=CREATED, status="SUCCESS"
    )
    assert answer.json()["data"] == {"id": None, "recorded": False}
    assert native.get(f"/sessions/{session_id}").json()["actions"] == []


def test_a_call_its_connector_does_not_describe_is_recorded_under_its_path_with_no_undo(
    compat: httpx.Client, native: httpx.Client
) -> None:
    session_id = open_session(compat)
    payload = {"owner": "acme", "repo": "shop", "issue_number": 7}
    log(
        compat,
        session_id,
        apiName="github.rest.issues.lock",
        payload=payload,
        response={"status": 204},
        status="SUCCESS",
    )
    (action,) = native.get(f"/sessions/{session_id}").json()["actions"]
    assert (action["apiName"], action["operationType"], action["payload"]) == ("rest.issues.lock", "OTHER", payload)
    assert action["undo"] is None


def test_a_failed_call_is_recorded_with_the_error_the_sdk_sent_and_ends_the_session(
    compat: httpx.Client, native: httpx.Client
) -> None:
    session_id = open_session(compat)
    answer = log(
        compat, session_id, apiName="github.rest.issues.lock", payload={}, response="Not Found", status="FAILED"
    )
    assert answer.json()["data"]["status"] == "FAILED"
    shown = native.get(f"/sessions/{session_id}").json()
    assert [a["error"] for a in shown["actions"]] == ["Not Found"]
    assert shown["status"] == "FAILED"  # nothing to undo


def test_a_call_whose_success_log_arrives_after_the_next_calls_failure_ended_the_session_is_rolled_back(
    compat: httpx.Client, native: httpx.Client
) -> None:
    # The published npm SDK sends a success's log without awaiting it: the next call's failure log, awaited,
    # can reach the server first and end the session FAILED with nothing to undo (seen in CI).
    session_id = open_session(compat)
    failed = log(
        compat, session_id, apiName="github.rest.issues.update", payload={}, response="Not Found", status="FAILED"
    )
    assert failed.status_code == 200, failed.text
    assert native.get(f"/sessions/{session_id}").json()["status"] == "FAILED"
    assert native.get(f"/sessions/{session_id}/rollback").status_code == 404  # nothing to undo yet
    assert log_customer_created(compat, session_id).status_code == 200
    job = native.get(f"/sessions/{session_id}/rollback").json()
    assert (job["wholeSession"], job["trigger"]) == (True, "customers.create reported after the session failed")


def test_a_block_policy_answers_403_policy_blocked_and_undoes_the_call_that_ran(
    server: RunningServer, tenant: Tenant, compat: httpx.Client, native: httpx.Client
) -> None:
    server.engine.policies.add_policy(
        tenant.org_id, NewPolicy("no new customers", "BLOCK", connector="stripe", api_name="customers.create")
    )
    session_id = open_session(compat)
    answer = log_customer_created(compat, session_id)
    body = problem(answer, 403)
    assert slug(body) == "policy-blocked" and "being undone" in body["detail"]
    job = native.get(f"/sessions/{session_id}/rollback").json()
    assert (job["wholeSession"], job["trigger"]) == (False, "customers.create blocked by policy 'no new customers'")


def test_a_require_approval_policy_opens_a_review_after_the_call(
    server: RunningServer, tenant: Tenant, compat: httpx.Client, native: httpx.Client
) -> None:
    server.engine.policies.add_policy(
        tenant.org_id, NewPolicy("look at customers", "REQUIRE_APPROVAL", connector="stripe")
    )
    session_id = open_session(compat)
    log_customer_created(compat, session_id)
    (approval,) = native.get(f"/sessions/{session_id}").json()["approvals"]
    assert (approval["purpose"], approval["status"]) == ("AFTER_EXECUTION", "PENDING")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"apiName": "stripe", "payload": {}, "status": "SUCCESS"}, "apiName"),
        ({"apiName": "nosuch.things.create", "payload": {}, "status": "SUCCESS"}, "connector"),
        ({"apiName": "stripe.customers.create", "payload": {}, "status": "DONE"}, None),
        ({"payload": {}, "status": "SUCCESS"}, None),
    ],
)
def test_a_malformed_action_log_is_refused_with_a_400_that_says_why(
    compat: httpx.Client, body: dict[str, Any], field: str | None
) -> None:
    session_id = open_session(compat)
    refused = problem(compat.post(f"/sessions/{session_id}/actions", json=body), 400)
    if field is not None:
        assert refused["field"] == field


def test_a_log_for_a_session_that_does_not_exist_is_not_found(compat: httpx.Client) -> None:
    answer = log(
        compat, "ses_nosuch", apiName="stripe.customers.create", payload={}, response=CREATED, status="SUCCESS"
    )
    problem(answer, 404)


# calls held for approval ----------------------------------------------------------------------------------------------
#: The call :func:`hold_customer_create` holds, as the SDK names it.
HELD_CREATE = {"apiName": "stripe.v1.customers.create", "payload": {"params": {"email": "ada@example.com"}}}


def hold_customer_create(compat: httpx.Client, session_id: str) -> dict[str, Any]:
    """The log the Python SDK sends before a call listed in ``requires_approval``."""
    answer = log(compat, session_id, **HELD_CREATE, response={}, status="PENDING_APPROVAL", timeoutMs=60_000)
    assert answer.status_code == 200, answer.text
    held: dict[str, Any] = answer.json()["data"]
    return held


def log_held_create_failed(compat: httpx.Client, session_id: str) -> httpx.Response:
    """The ``FAILED`` log the Python SDK sends after the call of :func:`hold_customer_create` was rejected, timed
    out or failed once approved: the same call, as a new log."""
    return log(compat, session_id, **HELD_CREATE, response={}, status="FAILED")


def test_a_held_call_is_a_write_ahead_record_waiting_for_its_approval(
    compat: httpx.Client, native: httpx.Client
) -> None:
    session_id = open_session(compat)
    held = hold_customer_create(compat, session_id)
    assert held["status"] == "PENDING_APPROVAL"
    polled = compat.get(f"/approvals/{held['approvalRequest']['id']}").json()["data"]
    assert (polled["status"], polled["reason"], polled["actionId"]) == ("PENDING", None, held["id"])
    (approval,) = native.get(f"/sessions/{session_id}").json()["approvals"]
    assert approval["purpose"] == "BEFORE_EXECUTION"


def test_an_approved_call_confirmed_by_patch_gets_the_undo_its_connector_derives(
    compat: httpx.Client, native: httpx.Client
) -> None:
    session_id = open_session(compat)
    held = hold_customer_create(compat, session_id)
    native.post(f"/approvals/{held['approvalRequest']['id']}/approve", json={})
    assert compat.get(f"/approvals/{held['approvalRequest']['id']}").json()["data"]["status"] == "APPROVED"
    answer = compat.patch(
        f"/sessions/{session_id}/actions/{held['id']}", json={"status": "SUCCESS", "response": CREATED}
    )
    assert answer.json()["data"]["status"] == "SUCCESS"
    (action,) = native.get(f"/sessions/{session_id}").json()["actions"]
    assert (action["apiName"], action["undo"]["type"], action["undo"]["id"]) == (
        "customers.create",
        "stripe-delete",
        "cus_Compat1",
    )


def test_a_rejection_reaches_the_poll_with_the_reason_and_the_sdks_failed_log_after_it_is_accepted(
    compat: httpx.Client, native: httpx.Client
) -> None:
    session_id = open_session(compat)
    held = hold_customer_create(compat, session_id)
    approval_id = held["approvalRequest"]["id"]
    native.post(f"/approvals/{approval_id}/reject", json={"reason": "not this customer"})
    polled = compat.get(f"/approvals/{approval_id}").json()["data"]
    assert (polled["status"], polled["reason"]) == ("REJECTED", "not this customer")
    echo = log_held_create_failed(compat, session_id)
    assert echo.status_code == 200 and echo.json()["data"]["id"] == held["id"]
    assert [a["status"] for a in native.get(f"/sessions/{session_id}").json()["actions"]] == ["FAILED"]


def test_a_held_call_the_agent_gives_up_on_fails_and_closes_its_approval(
    compat: httpx.Client, native: httpx.Client
) -> None:
    """Their SDK's ApprovalTimeoutError: it stops polling and logs the call FAILED."""
    session_id = open_session(compat)
    held = hold_customer_create(compat, session_id)
    log_held_create_failed(compat, session_id)
    shown = native.get(f"/sessions/{session_id}").json()
    assert [a["status"] for a in shown["actions"]] == ["FAILED"]
    assert shown["approvals"][0]["status"] == "REJECTED"
    assert compat.get(f"/approvals/{held['approvalRequest']['id']}").json()["data"]["status"] == "REJECTED"


def test_a_block_policy_refuses_a_held_call_before_it_runs(
    server: RunningServer, tenant: Tenant, compat: httpx.Client
) -> None:
    server.engine.policies.add_policy(tenant.org_id, NewPolicy("no new customers", "BLOCK", connector="stripe"))
    session_id = open_session(compat)
    body = {"apiName": "stripe.v1.customers.create", "payload": {}, "response": {}, "timeoutMs": 60_000}
    refused = problem(log(compat, session_id, **body, status="PENDING_APPROVAL"), 403)
    assert slug(refused) == "policy-blocked" and "not made" in refused["detail"]


def test_a_confirmation_other_than_success_is_refused(compat: httpx.Client) -> None:
    session_id = open_session(compat)
    held = hold_customer_create(compat, session_id)
    refused = problem(compat.patch(f"/sessions/{session_id}/actions/{held['id']}", json={"status": "FAILED"}), 400)
    assert refused["field"] == "status"


def test_a_confirmation_of_an_action_of_another_session_is_not_found(compat: httpx.Client) -> None:
    held = hold_customer_create(compat, open_session(compat))
    other = open_session(compat)
    problem(compat.patch(f"/sessions/{other}/actions/{held['id']}", json={"status": "SUCCESS", "response": {}}), 404)


def test_an_approval_timeout_out_of_range_is_refused(compat: httpx.Client) -> None:
    session_id = open_session(compat)
    answer = log(
        compat, session_id, apiName="stripe.customers.create", payload={}, status="PENDING_APPROVAL", timeoutMs=0
    )
    problem(answer, 400)


# connector settings ---------------------------------------------------------------------------------------------------
def store_stripe_settings(server: RunningServer, tenant: Tenant, api_base: str) -> None:
    """The organisation's Stripe settings, enabled: the server reads and undoes through ``api_base``."""
    server.services.configuration.configure_connector(
        tenant.org_id, "stripe", enabled=True, config={"apiBase": api_base}, credentials={"apiKey": "sk_test_1"}
    )


def sent_to_stripe(fake_stripe: FakeStripe, path: str, form: dict[str, str]) -> dict[str, Any]:
    """What the fake Stripe answers to ``POST path`` with ``form``, as the agent's own client sends it."""
    answer = httpx.post(f"{fake_stripe.base_url}{path}", data=form, headers={"Authorization": "Bearer sk_test_1"})
    assert answer.status_code == 200, answer.text
    made: dict[str, Any] = answer.json()
    return made


def test_validating_credentials_says_per_connector_whether_the_server_can_undo_with_the_stored_settings(
    server: RunningServer, tenant: Tenant, compat: httpx.Client
) -> None:
    store_stripe_settings(server, tenant, "http://127.0.0.1:9")
    checked = compat.get("/settings/credentials/validate", params={"connectors": "stripe,github"}).json()["data"]
    assert checked["stripe"] == {"valid": True}
    assert checked["github"]["valid"] is False and "github" in checked["github"]["reason"]


def test_validating_credentials_of_no_connector_is_refused(compat: httpx.Client) -> None:
    assert (
        problem(compat.get("/settings/credentials/validate", params={"connectors": " , "}), 400)["field"]
        == "connectors"
    )


# before-states --------------------------------------------------------------------------------------------------------
def test_the_registry_lists_each_path_of_an_update_with_a_before_state_and_of_a_delete_without(
    compat: httpx.Client,
) -> None:
    listed = {entry["apiName"]: entry["captureBeforeState"] for entry in compat.get("/registry").json()["data"]}
    assert {name: listed[name] for name in ("stripe.customers.update", "stripe.v1.customers.update")} == {
        "stripe.customers.update": True,
        "stripe.v1.customers.update": True,
    }
    assert (listed["stripe.Customer.modify"], listed["stripe.Customer.delete"]) == (True, False)
    assert "stripe.customers.create" not in listed


def test_an_update_logged_with_no_before_state_says_its_undo_cannot_restore_it(
    compat: httpx.Client, native: httpx.Client
) -> None:
    """The npm SDK never asks for a before-state: the update's record says so as if the SDK said it failed."""
    session_id = open_session(compat)
    body = {"apiName": "stripe.customers.update", "payload": UPDATED, "response": {"id": "cus_1"}}
    log(compat, session_id, **body, status="SUCCESS")
    (action,) = native.get(f"/sessions/{session_id}").json()["actions"]
    assert action["undo"]["why"] == CAPTURE_FAILED


def test_a_precapture_without_stored_settings_says_the_capture_failed_and_logs_why(
    compat: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    session_id = open_session(compat)
    body = {"apiName": "stripe.v1.customers.update", "payload": {"customer": "cus_1", "params": {"email": "b@x"}}}
    answer = compat.post(f"/sessions/{session_id}/actions/precapture", json=body).json()["data"]
    assert answer == {"precaptureId": None, "captureFailed": True, "reason": PRECAPTURE_FAILED}
    assert "not enabled" in caplog.text


def test_a_precapture_tells_the_agent_the_same_whether_the_object_exists_or_not(
    server: RunningServer, tenant: Tenant, compat: httpx.Client, fake_stripe: FakeStripe
) -> None:
    """Stripe's own words ("No such customer") would tell the agent which objects exist under the server's key."""
    store_stripe_settings(server, tenant, fake_stripe.base_url)
    session_id = open_session(compat)
    body = {"apiName": "stripe.v1.customers.update", "payload": {"customer": "cus_nosuch", "params": {"email": "b@x"}}}
    answer = compat.post(f"/sessions/{session_id}/actions/precapture", json=body).json()["data"]
    assert answer == {"precaptureId": None, "captureFailed": True, "reason": PRECAPTURE_FAILED}


def test_a_precapture_of_a_call_whose_undo_needs_nothing_read_keeps_nothing(compat: httpx.Client) -> None:
    session_id = open_session(compat)
    body = {"apiName": "stripe.v1.customers.delete", "payload": "cus_1"}
    answer = compat.post(f"/sessions/{session_id}/actions/precapture", json=body).json()["data"]
    assert answer == {"precaptureId": None, "captureFailed": False}


def test_a_log_naming_a_precapture_the_server_never_made_is_recorded_saying_its_undo_cannot_restore_it(
    compat: httpx.Client, native: httpx.Client
) -> None:
    """The call ran: refusing its log would lose it."""
    session_id = open_session(compat)
    body = {"apiName": "stripe.customers.update", "payload": UPDATED, "response": {"id": "cus_1"}}
    answer = log(compat, session_id, **body, status="SUCCESS", precaptureId="pre_nosuch")
    assert answer.status_code == 200, answer.text
    (action,) = native.get(f"/sessions/{session_id}").json()["actions"]
    assert (action["status"], action["undo"]) == (
        "SUCCESS",
        {"type": "none", "why": PRECAPTURE_UNKNOWN, "requireApproval": False},
    )


def test_a_log_naming_a_precapture_read_for_another_call_is_recorded_saying_its_undo_cannot_restore_it(
    server: RunningServer, tenant: Tenant, compat: httpx.Client, native: httpx.Client, fake_stripe: FakeStripe
) -> None:
    store_stripe_settings(server, tenant, fake_stripe.base_url)
    customer = sent_to_stripe(fake_stripe, "/v1/customers", {"email": "old@example.com"})
    session_id = open_session(compat)
    read = {
        "apiName": "stripe.v1.customers.update",
        "payload": {"customer": customer["id"], "params": {"email": "b@x"}},
    }
    precapture_id = compat.post(f"/sessions/{session_id}/actions/precapture", json=read).json()["data"]["precaptureId"]
    assert precapture_id is not None
    body = {"apiName": "stripe.subscriptions.update", "payload": {"subscription": "sub_1", "params": {"metadata": {}}}}
    answer = log(compat, session_id, **body, response={"id": "sub_1"}, status="SUCCESS", precaptureId=precapture_id)
    assert answer.status_code == 200, answer.text
    (action,) = native.get(f"/sessions/{session_id}").json()["actions"]
    assert (action["apiName"], action["undo"]["type"], action["undo"]["why"]) == (
        "subscriptions.update",
        "none",
        PRECAPTURE_OTHER_CALL,
    )


# what holds as on the native API --------------------------------------------------------------------------------------
def test_a_reported_calls_secrets_are_redacted_before_they_are_stored(
    compat: httpx.Client, native: httpx.Client
) -> None:
    session_id = open_session(compat)
    payload = {"params": {"email": "ada@example.com", "metadata": {"api_key": "sk_live_planted"}}}
    answer = log(
        compat, session_id, apiName="stripe.customers.create", payload=payload, response=CREATED, status="SUCCESS"
    )
    assert answer.status_code == 200, answer.text
    assert "sk_live_planted" not in native.get(f"/sessions/{session_id}").text


def test_a_token_of_another_organisation_finds_none_of_this_ones_sessions(
    server: RunningServer, compat: httpx.Client
) -> None:
    session_id = open_session(compat)
    elsewhere = server.tenant()
    token = token_of(server, server.key(elsewhere, Role.AGENT))
    answer = httpx.get(f"{server.url}/compat/sessions/{session_id}", headers={"Authorization": f"Bearer {token}"})
    problem(answer, 404)


def test_a_body_over_the_servers_limit_is_refused_with_413(compat: httpx.Client) -> None:
    session_id = open_session(compat)
    huge = {"params": {"description": "x" * (2 * 1024 * 1024)}}
    problem(log(compat, session_id, apiName="stripe.customers.create", payload=huge, status="SUCCESS"), 413)


def test_a_body_that_is_not_json_is_refused_with_a_problem(compat: httpx.Client) -> None:
    answer = compat.post("/sessions", content=b"{not json", headers={"Content-Type": "application/json"})
    problem(answer, 400)


# found by a second reading --------------------------------------------------------------------------------------------


def test_a_token_whose_signature_is_not_ascii_is_refused_with_a_401(server: RunningServer) -> None:
    with httpx.Client(base_url=f"{server.url}/compat") as anyone:
        answer = anyone.get("/sessions/ses_1", headers={"Authorization": "Bearer art_abc.\u00e9\u00e9".encode()})
    assert slug(problem(answer, 401)) == "unauthorized"


def test_a_held_call_naming_a_precapture_the_server_never_made_leaves_no_held_call_behind(
    compat: httpx.Client, native: httpx.Client
) -> None:
    session_id = open_session(compat)
    body = {"apiName": "stripe.customers.update", "payload": {"customer": "cus_1", "params": {}}, "response": None}
    problem(log(compat, session_id, status="PENDING_APPROVAL", precaptureId="pre_nosuch", **body), 404)
    assert native.get(f"/sessions/{session_id}").json()["actions"] == []


def test_a_blocked_call_that_cannot_be_undone_is_answered_so_and_waits_for_a_reviewer(
    server: RunningServer, tenant: Tenant, compat: httpx.Client, native: httpx.Client
) -> None:
    server.engine.policies.add_policy(
        tenant.org_id, NewPolicy("no updates", "BLOCK", connector="stripe", api_name="customers.update")
    )
    session_id = open_session(compat)
    payload = {"customer": "cus_1", "params": {"email": "new@example.com"}}
    answer = log(compat, session_id, apiName="stripe.customers.update", payload=payload, response={}, status="SUCCESS")
    body = problem(answer, 403)
    assert slug(body) == "policy-blocked" and "cannot undo it: it waits for a reviewer" in body["detail"]
    reviews = native.get("/approvals", params={"status": "PENDING"}).json()
    assert [r["actionId"] for r in reviews] == [body["actionId"]]


def test_a_before_state_read_of_another_object_is_never_restored_onto_the_object_the_call_changed() -> None:
    connector = StripeConnector()
    before = {"id": "cus_A", "object": "customer", "email": "alice@example.com"}
    call = connector.recorded(("customers", "update"), {"customer": "cus_B", "params": {"email": "b@x"}}, before)
    assert call is not None
    assert connector.undo_for(call, {"id": "cus_B"}, None).is_none
    same = connector.recorded(("customers", "update"), {"customer": "cus_A", "params": {"email": "b@x"}}, before)
    assert same is not None
    assert connector.undo_for(same, {"id": "cus_A"}, None).params["params"] == {"email": "alice@example.com"}


# the third reading: nothing that ran is lost, and reviewers are told what cannot be undone -------------------------
UPDATED = {"customer": "cus_1", "params": {"email": "new@example.com"}}


def log_update_whose_capture_failed(compat: httpx.Client, session_id: str) -> httpx.Response:
    """The log the Python SDK sends after ``customers.update`` when its precapture said ``captureFailed``."""
    body = {"apiName": "stripe.customers.update", "payload": UPDATED, "response": {"id": "cus_1"}}
    return log(compat, session_id, **body, status="SUCCESS", captureFailed=True)


def test_an_update_whose_before_state_was_not_read_is_recorded_saying_its_undo_cannot_restore_it(
    compat: httpx.Client, native: httpx.Client
) -> None:
    session_id = open_session(compat)
    assert log_update_whose_capture_failed(compat, session_id).status_code == 200
    (action,) = native.get(f"/sessions/{session_id}").json()["actions"]
    assert action["undo"] == {"type": "none", "why": CAPTURE_FAILED, "requireApproval": False}


def test_a_review_of_an_update_whose_before_state_was_not_read_says_it_cannot_be_undone(
    server: RunningServer, tenant: Tenant, compat: httpx.Client, native: httpx.Client
) -> None:
    server.engine.policies.add_policy(tenant.org_id, NewPolicy("look at customers", "REQUIRE_APPROVAL"))
    log_update_whose_capture_failed(compat, open_session(compat))
    (review,) = native.get("/approvals", params={"include": "consequences"}).json()
    assert review["consequences"]["approve"]["summary"] == (
        f"The action stays done, and nothing can undo it: {CAPTURE_FAILED}."
    )


def test_the_dashboards_action_view_says_an_updates_before_state_was_not_read(
    server: RunningServer, tenant: Tenant, compat: httpx.Client
) -> None:
    session_id = open_session(compat)
    log_update_whose_capture_failed(compat, session_id)
    with visitor(server, account(server, tenant, UserRole.REVIEWER)) as reviewer:
        page = reviewer.get(f"/dashboard/sessions/{session_id}").text
    assert f"<p>{CAPTURE_FAILED}</p>" in page


def test_a_create_answered_without_an_id_is_recorded_with_no_undo_saying_why(
    compat: httpx.Client, native: httpx.Client
) -> None:
    session_id = open_session(compat)
    answer = log(
        compat, session_id, apiName="stripe.customers.create", payload={"params": {}}, response={}, status="SUCCESS"
    )
    assert answer.status_code == 200, answer.text
    (action,) = native.get(f"/sessions/{session_id}").json()["actions"]
    assert (action["status"], action["undo"]["type"]) == ("SUCCESS", "none")
    assert action["undo"]["why"] == (
        "no undo could be derived from what the call returned (undo.id: must be the id of a Stripe object)"
    )


def test_a_create_logged_twice_by_the_sdks_retry_is_recorded_once(compat: httpx.Client, native: httpx.Client) -> None:
    session_id = open_session(compat)
    first, again = log_customer_created(compat, session_id), log_customer_created(compat, session_id)
    assert again.json()["data"]["id"] == first.json()["data"]["id"]
    assert len(native.get(f"/sessions/{session_id}").json()["actions"]) == 1


def test_creates_of_two_objects_with_the_same_payload_are_two_calls(compat: httpx.Client, native: httpx.Client) -> None:
    session_id = open_session(compat)
    for made in ("cus_A", "cus_B"):
        log(compat, session_id, apiName="stripe.customers.create", payload={}, response={"id": made}, status="SUCCESS")
    assert len(native.get(f"/sessions/{session_id}").json()["actions"]) == 2


def test_a_failed_log_after_a_rejection_ends_the_held_call_it_names_not_a_later_one(
    compat: httpx.Client, native: httpx.Client
) -> None:
    session_id = open_session(compat)
    first = hold_customer_create(compat, session_id)
    other = {"apiName": "stripe.v1.customers.create", "payload": {"params": {"email": "bob@example.com"}}}
    second = log(compat, session_id, **other, response={}, status="PENDING_APPROVAL", timeoutMs=60_000).json()["data"]
    native.post(f"/approvals/{first['approvalRequest']['id']}/reject", json={"reason": "not ada"})
    echo = log_held_create_failed(compat, session_id)
    assert echo.json()["data"]["id"] == first["id"]
    statuses = {a["actionId"]: a["status"] for a in native.get(f"/sessions/{session_id}").json()["actions"]}
    assert statuses == {first["id"]: "FAILED", second["id"]: "PENDING_APPROVAL"}


def test_a_held_update_confirmed_with_no_before_state_says_its_undo_cannot_restore_it(
    compat: httpx.Client, native: httpx.Client
) -> None:
    session_id = open_session(compat)
    body = {"apiName": "stripe.customers.update", "payload": UPDATED, "response": {}}
    held = log(compat, session_id, **body, status="PENDING_APPROVAL", captureFailed=True).json()["data"]
    native.post(f"/approvals/{held['approvalRequest']['id']}/approve", json={})
    compat.patch(
        f"/sessions/{session_id}/actions/{held['id']}", json={"status": "SUCCESS", "response": {"id": "cus_1"}}
    )
    (action,) = native.get(f"/sessions/{session_id}").json()["actions"]
    assert (action["status"], action["undo"]["why"]) == ("SUCCESS", CAPTURE_FAILED)


def test_a_confirmation_sent_again_is_answered_with_the_action_it_confirmed(
    compat: httpx.Client, native: httpx.Client
) -> None:
    """Their SDK resends on a 5xx: the first may have been recorded, and a 409 would reach the agent."""
    session_id = open_session(compat)
    held = hold_customer_create(compat, session_id)
    native.post(f"/approvals/{held['approvalRequest']['id']}/approve", json={})
    confirm = {"status": "SUCCESS", "response": CREATED}
    first, again = (compat.patch(f"/sessions/{session_id}/actions/{held['id']}", json=confirm) for _ in range(2))
    assert (first.status_code, again.status_code) == (200, 200)
    assert again.json()["data"] == first.json()["data"]


# the fourth reading: what the second reading of /compat found -----------------------------------------------------
#: The stripe module's abstract resource classes: they name no object, so no call through them is described.
ABSTRACT_STRIPE_CLASSES = (
    "APIResource",
    "SingletonAPIResource",
    "CreateableAPIResource",
    "DeletableAPIResource",
    "UpdateableAPIResource",
    "ListableAPIResource",
)


@pytest.mark.parametrize("name", ABSTRACT_STRIPE_CLASSES)
def test_a_call_logged_through_an_abstract_stripe_class_is_recorded_with_no_undo(
    compat: httpx.Client, native: httpx.Client, name: str
) -> None:
    session_id = open_session(compat)
    answer = log(compat, session_id, apiName=f"stripe.{name}.create", payload={}, response=CREATED, status="SUCCESS")
    assert answer.status_code == 200, answer.text
    (action,) = native.get(f"/sessions/{session_id}").json()["actions"]
    assert (action["apiName"], action["status"], action["undo"]["type"]) == (f"{name}.create", "SUCCESS", "none")


@pytest.mark.parametrize("name", ABSTRACT_STRIPE_CLASSES)
def test_a_precapture_through_an_abstract_stripe_class_keeps_nothing(compat: httpx.Client, name: str) -> None:
    session_id = open_session(compat)
    body = {"apiName": f"stripe.{name}.modify", "payload": {"sid": "cus_1", "email": "b@x"}}
    answer = compat.post(f"/sessions/{session_id}/actions/precapture", json=body)
    assert answer.status_code == 200, answer.text
    assert answer.json()["data"] == {"precaptureId": None, "captureFailed": False}


#: A finalization the SDK reports with the invoice's id positional only (their payload keeps the params alone).
FINALIZED = {"apiName": "stripe.invoices.finalize_invoice", "payload": {"params": {"auto_advance": False}}}


def held_then_confirmed(
    compat: httpx.Client, native: httpx.Client, held_call: dict[str, Any], response: Any
) -> dict[str, Any]:
    """The action of ``held_call`` held for a reviewer, approved, then confirmed with the ``response`` it got
    once it ran, as their SDK confirms it (the confirmation must be accepted: the call ran)."""
    session_id = open_session(compat)
    held = log(compat, session_id, **held_call, status="PENDING_APPROVAL").json()["data"]
    native.post(f"/approvals/{held['approvalRequest']['id']}/approve", json={})
    confirm = {"status": "SUCCESS", "response": response}
    answer = compat.patch(f"/sessions/{session_id}/actions/{held['id']}", json=confirm)
    assert answer.status_code == 200, answer.text
    (action,) = native.get(f"/sessions/{session_id}").json()["actions"]
    assert action["status"] == "SUCCESS"
    return action


def test_a_held_finalization_confirmed_whose_payload_names_no_invoice_is_voided_by_the_responses_id(
    compat: httpx.Client, native: httpx.Client
) -> None:
    action = held_then_confirmed(compat, native, FINALIZED, {"id": "in_1", "object": "invoice", "status": "open"})
    assert action["undo"] == {"type": "stripe-void", "resource": "invoices", "id": "in_1", "requireApproval": False}


def test_a_held_call_confirmed_with_an_undo_its_connector_refuses_is_recorded_with_no_undo_saying_why(
    compat: httpx.Client, native: httpx.Client
) -> None:
    undo = held_then_confirmed(compat, native, FINALIZED, {})["undo"]
    assert undo["type"] == "none" and "undo.id" in undo["why"]


def test_a_held_call_confirmed_with_an_undo_its_redacted_record_could_not_run_is_recorded_with_no_undo(
    compat: httpx.Client, native: httpx.Client
) -> None:
    """A branch named like a token: the stored undo would name ``[REDACTED]``, which its connector refuses."""
    ref = "refs/heads/ghp_" + "a" * 36
    payload = {"owner": "acme", "repo": "shop", "ref": ref, "sha": "0" * 40}
    created = {"apiName": "github.rest.git.createRef", "payload": payload}
    undo = held_then_confirmed(compat, native, created, {"status": 201, "data": {"ref": ref}})["undo"]
    assert undo["type"] == "none" and "undo.ref" in undo["why"]


def test_a_held_octokit_create_confirmed_gets_the_undo_its_connector_derives(
    compat: httpx.Client, native: httpx.Client
) -> None:
    payload = {"owner": "acme", "repo": "shop", "issue_number": 7, "body": "shipped"}
    commented = {"apiName": "github.rest.issues.createComment", "payload": payload}
    action = held_then_confirmed(compat, native, commented, {"status": 201, "data": {"id": 42}})
    assert (action["apiName"], action["undo"]["type"], action["undo"]["id"]) == (
        "issues.comments.create",
        "github-delete-comment",
        42,
    )


def test_a_failed_log_whose_error_is_longer_than_a_record_keeps_is_recorded_with_its_start(
    compat: httpx.Client, native: httpx.Client
) -> None:
    session_id = open_session(compat)
    error = "Stripe said: " + "x" * 20_000
    answer = log(compat, session_id, apiName="stripe.customers.create", payload={}, response=error, status="FAILED")
    assert answer.status_code == 200, answer.text
    shown = native.get(f"/sessions/{session_id}").json()
    assert [a["error"] for a in shown["actions"]] == [error[:10_000]]
    assert shown["status"] == "FAILED"  # the session ended as a failure ends it


def kept_precapture(server: RunningServer, tenant: Tenant, session_id: str) -> dict[str, str]:
    """A precapture of customer ``cus_1`` (its email ``old@example.com``) kept for ``session_id``'s update of it,
    as a log names it."""
    kept = server.engine.recording.keep_before_state(
        tenant.org_id, session_id, "stripe", "customers.update", {"id": "cus_1", "email": "old@example.com"}
    )
    return {"precaptureId": kept.precapture_id}


def logged_together(
    server: RunningServer,
    tenant: Tenant,
    compat: httpx.Client,
    monkeypatch: pytest.MonkeyPatch,
    use_case: str,
    session_id: str,
    body: dict[str, Any],
) -> list[httpx.Response]:
    """Two logs of ``body`` naming one precapture (of customer ``cus_1``, kept for ``session_id``), let into the
    engine's ``use_case`` together: each has seen the precapture untied before either ties it, whichever of them
    the server would otherwise run first."""
    together, entries = threading.Barrier(2), itertools.count()
    recording = type(server.engine.recording)
    entered = getattr(recording, use_case)

    def enter_together(self: Any, *args: Any, **kwargs: Any) -> Any:
        if next(entries) < 2:  # the two logs' first entries: a log recorded again then goes straight in
            together.wait(timeout=30)  # a guard: a log held back here alone fails, which its answer shows
        return entered(self, *args, **kwargs)

    monkeypatch.setattr(recording, use_case, enter_together)
    named = kept_precapture(server, tenant, session_id)
    with ThreadPoolExecutor(2) as pool:
        both = [pool.submit(log, compat, session_id, **body, **named) for _ in range(2)]
        return [f.result() for f in both]


def test_two_held_logs_naming_one_precapture_at_once_hold_one_call_and_leave_nothing_of_the_other(
    server: RunningServer,
    tenant: Tenant,
    compat: httpx.Client,
    native: httpx.Client,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The before-state is tied in the write-ahead's own transaction: the loser's held call is not left open
    (expiring, it would roll the session back)."""
    body = {"apiName": "stripe.customers.update", "payload": UPDATED, "status": "PENDING_APPROVAL"}
    session_id = open_session(compat)
    answers = logged_together(server, tenant, compat, monkeypatch, "log_action", session_id, body)
    assert sorted(a.status_code for a in answers) == [200, 409]
    shown = native.get(f"/sessions/{session_id}").json()
    assert [a["status"] for a in shown["actions"]] == ["PENDING_APPROVAL"]
    assert [p["status"] for p in shown["approvals"]] == ["PENDING"]


def test_an_update_undone_from_its_before_state_leaves_out_what_the_record_redacted(
    server: RunningServer, tenant: Tenant, compat: httpx.Client, native: httpx.Client, fake_stripe: FakeStripe
) -> None:
    """The before-state is kept redacted: restored as kept, ``[REDACTED]`` would be written over the secret."""
    store_stripe_settings(server, tenant, fake_stripe.base_url)
    made = {"email": "old@example.com", "metadata[api_key]": "k_old", "metadata[tier]": "gold"}
    customer = sent_to_stripe(fake_stripe, "/v1/customers", made)
    session_id = open_session(compat)
    payload = {"customer": customer["id"], "params": {"email": "new@example.com", "metadata": {"api_key": "k_new"}}}
    read = {"apiName": "stripe.v1.customers.update", "payload": payload}
    precapture_id = compat.post(f"/sessions/{session_id}/actions/precapture", json=read).json()["data"]["precaptureId"]
    updated = {"email": "new@example.com", "metadata[api_key]": "k_new"}
    sent_to_stripe(fake_stripe, f"/v1/customers/{customer['id']}", updated)  # the agent's update, as it ran
    body = {**read, "response": {"id": customer["id"]}, "status": "SUCCESS", "precaptureId": precapture_id}
    assert log(compat, session_id, **body).status_code == 200
    (action,) = native.get(f"/sessions/{session_id}").json()["actions"]
    assert action["undo"]["params"] == {"email": "old@example.com"}
    assert action["undo"]["notRestored"] == ["metadata.api_key"]
    native.post(f"/sessions/{session_id}/rollback", json={})
    assert native.get(f"/sessions/{session_id}/rollback", params={"wait": 30}).json()["status"] == "SUCCEEDED"
    assert fake_stripe.get(customer["id"]) == {
        **customer,
        "email": "old@example.com",
        "metadata": {"api_key": "k_new", "tier": "gold"},
    }


# the fifth reading: what the second reading of /compat found next --------------------------------------------------
def test_a_held_call_on_a_connected_account_confirmed_is_undone_in_that_account(
    server: RunningServer, tenant: Tenant, compat: httpx.Client, native: httpx.Client, fake_stripe: FakeStripe
) -> None:
    """Their SDK confirms a held call by its id alone: the account must come from the record, or the undo goes
    to the platform account, whose 404 would count as undone."""
    store_stripe_settings(server, tenant, fake_stripe.base_url)
    made = sent_to_stripe(fake_stripe, "/v1/customers", {"email": "ada@example.com"})
    params = {"params": {"email": "ada@example.com"}, "options": {"stripe_account": "acct_1Connected"}}
    action = held_then_confirmed(compat, native, {"apiName": "stripe.v1.customers.create", "payload": params}, made)
    assert action["payload"]["options"] == {"stripe_account": "acct_1Connected"}
    native.post(f"/sessions/{action['sessionId']}/rollback", json={})
    assert native.get(f"/sessions/{action['sessionId']}/rollback", params={"wait": 30}).json()["status"] == "SUCCEEDED"
    (deleted,) = fake_stripe.calls("DELETE", f"/v1/customers/{made['id']}")
    assert deleted.account == "acct_1Connected"


def test_a_blocked_create_logged_again_by_the_sdks_retry_is_refused_again(
    server: RunningServer, tenant: Tenant, compat: httpx.Client
) -> None:
    """The repeat is answered with the first record: the agent must hear the block again, not a 200."""
    server.engine.policies.add_policy(
        tenant.org_id, NewPolicy("no new customers", "BLOCK", connector="stripe", api_name="customers.create")
    )
    session_id = open_session(compat)
    first = problem(log_customer_created(compat, session_id), 403)
    again = problem(log_customer_created(compat, session_id), 403)
    assert (slug(again), again["actionId"], again["detail"]) == ("policy-blocked", first["actionId"], first["detail"])


def test_an_approved_calls_failure_logged_twice_is_recorded_once(compat: httpx.Client, native: httpx.Client) -> None:
    session_id = open_session(compat)
    held = hold_customer_create(compat, session_id)
    native.post(f"/approvals/{held['approvalRequest']['id']}/approve", json={})
    first, again = log_held_create_failed(compat, session_id), log_held_create_failed(compat, session_id)
    assert again.json()["data"]["id"] == first.json()["data"]["id"]
    statuses = [(a["actionId"], a["status"]) for a in native.get(f"/sessions/{session_id}").json()["actions"]]
    assert statuses == [(held["id"], "CLEARED"), (first.json()["data"]["id"], "FAILED")]


def update_undone_from_what_the_server_read(
    server: RunningServer, tenant: Tenant, compat: httpx.Client, fake_stripe: FakeStripe
) -> str:
    """A session whose update of a customer (its email was ``old@example.com``) the agent logged naming a
    precapture: the server read the customer with the organisation's key, and the undo restores that email."""
    store_stripe_settings(server, tenant, fake_stripe.base_url)
    customer = sent_to_stripe(fake_stripe, "/v1/customers", {"email": "old@example.com"})
    session_id = open_session(compat)
    read = {"apiName": "stripe.v1.customers.update", "payload": {"customer": customer["id"], "params": {"email": "x"}}}
    precapture_id = compat.post(f"/sessions/{session_id}/actions/precapture", json=read).json()["data"]["precaptureId"]
    body = {**read, "response": {"id": customer["id"]}, "status": "SUCCESS", "precaptureId": precapture_id}
    assert log(compat, session_id, **body).status_code == 200
    return session_id


def test_an_agent_key_reads_its_published_sdk_sessions_without_what_the_server_read_for_their_undos(
    server: RunningServer, tenant: Tenant, compat: httpx.Client, agent_key: str, fake_stripe: FakeStripe
) -> None:
    """Precapture reads any object the organisation's stored key reaches: the agent, which named the object, must
    not read it back through the undo's values (an operator does: it reviews and runs the undo)."""
    session_id = update_undone_from_what_the_server_read(server, tenant, compat, fake_stripe)
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {agent_key}"}) as agent:
        shown, paged = agent.get(f"/sessions/{session_id}"), agent.get(f"/sessions/{session_id}/actions")
    assert "old@example.com" not in shown.text + paged.text
    assert shown.json()["actions"][0]["undo"] == {"type": "stripe-restore", "requireApproval": False}


def test_an_operator_reads_the_values_a_published_sdk_calls_undo_restores(
    server: RunningServer, tenant: Tenant, compat: httpx.Client, native: httpx.Client, fake_stripe: FakeStripe
) -> None:
    session_id = update_undone_from_what_the_server_read(server, tenant, compat, fake_stripe)
    (action,) = native.get(f"/sessions/{session_id}").json()["actions"]
    assert action["undo"]["params"] == {"email": "old@example.com"}


def test_a_precapture_in_a_session_opened_on_the_native_api_is_refused_before_anything_is_read(
    server: RunningServer, tenant: Tenant, compat: httpx.Client, agent_key: str, fake_stripe: FakeStripe
) -> None:
    """Its record would show the agent key what the server read: only a published SDK's sessions hide it."""
    store_stripe_settings(server, tenant, fake_stripe.base_url)
    customer = sent_to_stripe(fake_stripe, "/v1/customers", {"email": "old@example.com"})
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {agent_key}"}) as agent:
        session_id = agent.post("/sessions", json={"agentId": "billing-agent"}).json()["id"]
    read = {"apiName": "stripe.v1.customers.update", "payload": {"customer": customer["id"], "params": {"email": "x"}}}
    refused = problem(compat.post(f"/sessions/{session_id}/actions/precapture", json=read), 409)
    assert "published SDK" in refused["detail"]
    assert fake_stripe.calls("GET") == []


def test_a_log_naming_a_precapture_a_held_call_took_is_recorded_saying_its_undo_cannot_restore_it(
    server: RunningServer, tenant: Tenant, compat: httpx.Client, native: httpx.Client
) -> None:
    """What was read before the held call is not the state before this one, which ran after it was read."""
    session_id = open_session(compat)
    update = {"apiName": "stripe.customers.update", "payload": UPDATED, **kept_precapture(server, tenant, session_id)}
    assert log(compat, session_id, **update, status="PENDING_APPROVAL").status_code == 200
    assert log(compat, session_id, **update, response={"id": "cus_1"}, status="SUCCESS").status_code == 200
    assert [a["undo"] for a in native.get(f"/sessions/{session_id}").json()["actions"]] == [
        None,
        {"type": "none", "why": PRECAPTURE_OTHER_CALL, "requireApproval": False},
    ]


def test_two_logs_naming_one_precapture_restore_the_first_call_alone(
    server: RunningServer, tenant: Tenant, compat: httpx.Client, native: httpx.Client
) -> None:
    session_id = open_session(compat)
    update = {"apiName": "stripe.customers.update", "payload": UPDATED, **kept_precapture(server, tenant, session_id)}
    for _ in range(2):
        assert log(compat, session_id, **update, response={"id": "cus_1"}, status="SUCCESS").status_code == 200
    first, second = (a["undo"] for a in native.get(f"/sessions/{session_id}").json()["actions"])
    assert (first["type"], first["params"]) == ("stripe-restore", {"email": "old@example.com"})
    assert second == {"type": "none", "why": PRECAPTURE_OTHER_CALL, "requireApproval": False}


def test_two_logs_naming_one_precapture_at_once_are_both_recorded_one_restoring_it(
    server: RunningServer,
    tenant: Tenant,
    compat: httpx.Client,
    native: httpx.Client,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The calls ran: the one that lost the precapture is recorded all the same, saying why it is not undone."""
    body = {"apiName": "stripe.customers.update", "payload": UPDATED, "response": {"id": "cus_1"}, "status": "SUCCESS"}
    session_id = open_session(compat)
    answers = logged_together(server, tenant, compat, monkeypatch, "record_reported_action", session_id, body)
    assert [a.status_code for a in answers] == [200, 200]
    undos = [a["undo"] for a in native.get(f"/sessions/{session_id}").json()["actions"]]
    assert sorted(undo["type"] for undo in undos) == ["none", "stripe-restore"]
    assert [undo["why"] for undo in undos if undo["type"] == "none"] == [PRECAPTURE_OTHER_CALL]


def test_a_failure_logged_after_a_rejected_calls_echo_and_another_call_is_recorded(
    compat: httpx.Client, native: httpx.Client
) -> None:
    """The SDK echoes a rejected call at once: the same call failing later, once the agent went on, is new."""
    session_id = open_session(compat)
    held = hold_customer_create(compat, session_id)
    native.post(f"/approvals/{held['approvalRequest']['id']}/reject", json={"reason": "not ada"})
    assert log_held_create_failed(compat, session_id).json()["data"]["id"] == held["id"]
    log_customer_created(compat, session_id)
    later = log_held_create_failed(compat, session_id).json()["data"]["id"]
    actions = native.get(f"/sessions/{session_id}").json()["actions"]
    assert [a["actionId"] for a in actions][::2] == [held["id"], later]
    assert actions[-1]["status"] == "FAILED"


def test_a_failure_logged_after_an_approved_calls_failure_and_another_call_is_recorded(
    compat: httpx.Client, native: httpx.Client
) -> None:
    session_id = open_session(compat)
    held = hold_customer_create(compat, session_id)
    native.post(f"/approvals/{held['approvalRequest']['id']}/approve", json={})
    first = log_held_create_failed(compat, session_id).json()["data"]["id"]
    log_customer_created(compat, session_id)
    later = log_held_create_failed(compat, session_id).json()["data"]["id"]
    actions = native.get(f"/sessions/{session_id}").json()["actions"]
    assert [a["actionId"] for a in actions] == [held["id"], first, actions[2]["actionId"], later]
    assert actions[-1]["status"] == "FAILED"


def test_a_log_whose_precapture_is_pruned_as_it_is_recorded_is_recorded_saying_its_undo_cannot_restore_it(
    server: RunningServer, tenant: Tenant, compat: httpx.Client, native: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Retention prunes a before-state a month old: one pruned between its read and its tie must not lose the call."""
    session_id = open_session(compat)
    named = kept_precapture(server, tenant, session_id)
    recording = type(server.engine.recording)
    record = recording.record_reported_action

    def pruned_first(self: Any, *args: Any, **kwargs: Any) -> Any:
        with server.engine.store.transaction() as tx:
            tx.conn.execute(
                schema.before_states.delete().where(schema.before_states.c.precapture_id == named["precaptureId"])
            )
        return record(self, *args, **kwargs)

    monkeypatch.setattr(recording, "record_reported_action", pruned_first)
    body = {"apiName": "stripe.customers.update", "payload": UPDATED, "response": {"id": "cus_1"}, **named}
    assert log(compat, session_id, **body, status="SUCCESS").status_code == 200
    (action,) = native.get(f"/sessions/{session_id}").json()["actions"]
    assert action["undo"] == {"type": "none", "why": PRECAPTURE_UNKNOWN, "requireApproval": False}

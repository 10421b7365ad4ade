"""The server redacts what it stores with the connector's own rules, whatever the client sent (DESIGN §4):
raw REST payloads, responses, undo configs, journal entries and error texts, over real HTTP, on both
databases, and so what webhooks carry too."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from peers import operator
from serving import RunningServer, Tenant

CARD = "4242424242424242"
#: Planted secrets: none of these may be read back from the server.
SLACK_TOKEN = "aB1cD2eF3gH4iJ5kL6mN7oP8"
SECRETS = (
    SLACK_TOKEN,
    "hunter2-pw",
    CARD,
    "4000 0566 5566 5556",
    "cs_live_client_secret",
    "ak_journal_key",
    "tok-in-url",
    "cvc]=314",  # the CVC where it was planted: "314" alone turns up in random ids
)


@pytest.fixture
def tenant(server: RunningServer) -> Tenant:
    return server.tenant()


@pytest.fixture
def api(tenant: Tenant) -> httpx.Client:
    return operator(tenant)


def new_session(api: httpx.Client) -> str:
    session_id: str = api.post("/sessions", json={"agentId": "raw-client", "intent": "pay"}).json()["id"]
    return session_id


def logged(api: httpx.Client, session_id: str, payload: dict[str, Any], connector: str = "http") -> str:
    body = {"connector": connector, "apiName": "POST /v1/charges", "operationType": "CREATE", "payload": payload}
    made = api.post(f"/sessions/{session_id}/actions", json=body)
    assert made.status_code == 201, made.text
    action_id: str = made.json()["action"]["actionId"]
    return action_id


def stored(api: httpx.Client, session_id: str) -> tuple[list[dict[str, Any]], str]:
    """The session's actions as the server reads them back, and the whole session as text."""
    session = api.get(f"/sessions/{session_id}")
    assert session.status_code == 200, session.text
    return session.json()["actions"], session.text


def assert_no_secret(text: str) -> None:
    assert not [s for s in SECRETS if s in text], text


def test_a_raw_rest_payload_is_stored_redacted_by_key_and_by_card_shape(api: httpx.Client) -> None:
    session_id = new_session(api)
    payload = {"password": "hunter2-pw", "card_number": "4000 0566 5566 5556", "memo": CARD, "amount": 12}
    logged(api, session_id, payload)
    (action,), text = stored(api, session_id)
    assert action["payload"] == {
        "password": "[REDACTED]",
        "card_number": "[REDACTED]",
        "memo": "[REDACTED]",
        "amount": 12,
    }
    assert_no_secret(text)


def test_a_raw_rest_response_and_undo_are_stored_redacted(
    server: RunningServer, tenant: Tenant, api: httpx.Client
) -> None:
    session_id = new_session(api)
    action_id = logged(api, session_id, {})
    outcome = {
        "status": "SUCCESS",
        "response": {"id": "pi_1", "client_secret": "cs_live_client_secret"},
        "undo": {"type": "http-delete", "url": "https://api.test/v1/charges/pi_1?access_token=tok-in-url"},
    }
    assert api.patch(f"/sessions/{session_id}/actions/{action_id}", json=outcome).status_code == 200
    (action,), text = stored(api, session_id)
    assert action["response"] == {"id": "pi_1", "client_secret": "[REDACTED]"}
    assert_no_secret(text)
    (record,) = server.engine.recording.get_session(tenant.org_id, session_id).actions  # the undo config, as stored
    assert record.undo is not None and record.undo.params["url"].endswith("?access_token=[REDACTED]")


def test_a_stripe_payload_is_redacted_with_the_stripe_connectors_own_fields(api: httpx.Client) -> None:
    session_id = new_session(api)
    logged(api, session_id, {"card": {"number": "4000 0566 5566 5556", "exp_month": 12}}, connector="stripe")
    (action,), _ = stored(api, session_id)
    assert action["payload"] == {"card": {"number": "[REDACTED]", "exp_month": 12}}


def test_a_journal_entry_is_stored_redacted(api: httpx.Client) -> None:
    session_id = new_session(api)
    journaled = {
        "idempotencyKey": "agentrein-journal-secret",
        "connector": "http",
        "apiName": "POST /v1/keys",
        "operationType": "CREATE",
        "status": "SUCCESS",
        "payload": {"apiKey": "ak_journal_key"},
        "response": {"secret": "cs_live_client_secret"},
    }
    assert api.post(f"/sessions/{session_id}/journal", json=journaled).status_code == 201
    (action,), text = stored(api, session_id)
    assert action["payload"] == {"apiKey": "[REDACTED]"}
    assert_no_secret(text)


def test_a_failed_calls_error_is_stored_without_the_token_of_its_url(api: httpx.Client) -> None:
    session_id = new_session(api)
    action_id = logged(api, session_id, {})
    error = "HTTPStatusError: Client error '400' for url 'https://api.test/v1/charges?access_token=tok-in-url'"
    failed = api.patch(f"/sessions/{session_id}/actions/{action_id}", json={"status": "FAILED", "error": error})
    assert failed.status_code == 200, failed.text
    (action,), text = stored(api, session_id)
    assert action["error"] == error.replace("tok-in-url", "[REDACTED]")
    assert_no_secret(text)


def test_a_journaled_failure_that_echoes_the_card_is_stored_without_its_number_or_cvc(api: httpx.Client) -> None:
    session_id = new_session(api)
    journaled = {
        "idempotencyKey": "agentrein-journal-card",
        "connector": "stripe",
        "apiName": "charges.create",
        "operationType": "CREATE",
        "status": "FAILED",
        "error": f"CardError: Your card {CARD} was declined (card[cvc]=314)",
    }
    assert api.post(f"/sessions/{session_id}/journal", json=journaled).status_code == 201
    (action,), text = stored(api, session_id)
    assert action["error"] == "CardError: Your card [REDACTED] was declined (card[cvc]=[REDACTED])"
    assert_no_secret(text)


def test_a_token_in_a_url_path_is_kept_neither_in_the_api_name_nor_in_the_undo_url(
    server: RunningServer, tenant: Tenant, api: httpx.Client
) -> None:
    session_id = new_session(api)
    body = {"connector": "http", "apiName": f"POST /services/T1/B1/{SLACK_TOKEN}", "operationType": "CREATE"}
    action_id = api.post(f"/sessions/{session_id}/actions", json=body).json()["action"]["actionId"]
    undo = {"type": "http-delete", "url": f"https://hooks.test/services/T1/B1/{SLACK_TOKEN}/messages/1"}
    outcome = {"status": "SUCCESS", "response": {}, "undo": undo}
    assert api.patch(f"/sessions/{session_id}/actions/{action_id}", json=outcome).status_code == 200
    (action,), text = stored(api, session_id)
    assert action["apiName"] == "POST /services/T1/B1/[REDACTED]"
    assert_no_secret(text)
    (record,) = server.engine.recording.get_session(tenant.org_id, session_id).actions  # the undo config, as stored
    assert record.undo is not None and record.undo.params["url"] == undo["url"].replace(SLACK_TOKEN, "[REDACTED]")

"""Wrapping an httpx.Client: what is recorded, how, and what the agent sees."""

from __future__ import annotations

import httpx
import pytest

from agentrein import (
    ActionStatus,
    AgentRein,
    DisplayStatus,
    OperationType,
    RollbackFailedError,
    SessionStatus,
    UndoStatus,
    UnknownConnectorError,
    ValidationError,
)
from agentrein_testing import FakeService


def wrapped(ar: AgentRein, service: FakeService, **options: object) -> tuple[httpx.Client, str]:
    session = ar.new_session(agent_id="billing-agent", intent="Process monthly invoice batch")
    client = ar.wrap(httpx.Client(base_url=service.base_url), session, connector="http", **options)  # type: ignore[arg-type]
    return client, session.id


def test_wrapped_client_is_still_an_httpx_client(ar: AgentRein, service: FakeService) -> None:
    client, _ = wrapped(ar, service)
    assert isinstance(client, httpx.Client)
    with client as inside:
        assert inside is client  # `with` hands back the guarded client, not the raw one
        assert str(inside.base_url).rstrip("/") == service.base_url


def test_reads_pass_through_unrecorded(ar: AgentRein, service: FakeService) -> None:
    client, session_id = wrapped(ar, service)
    assert client.get("/v1/orders").json() == {"data": []}
    client.request("GET", "/v1/orders")
    client.head("/v1/orders")
    assert ar.get_session(session_id).actions == []


def test_each_mutating_method_is_recorded_with_its_operation_and_api_name(ar: AgentRein, service: FakeService) -> None:
    client, session_id = wrapped(ar, service)
    order = client.post("/v1/orders?expand=items", json={"sku": "A1"}).json()
    client.put(f"/v1/orders/{order['id']}", json={"sku": "B2"})
    client.patch(f"/v1/orders/{order['id']}", json={"note": "rush"})
    client.request("DELETE", f"/v1/orders/{order['id']}")
    actions = ar.get_session(session_id).actions
    assert [(a.seq, a.api_name, a.operation_type, a.status) for a in actions] == [
        (1, "POST /v1/orders", OperationType.CREATE, ActionStatus.SUCCESS),
        (2, f"PUT /v1/orders/{order['id']}", OperationType.UPDATE, ActionStatus.SUCCESS),
        (3, f"PATCH /v1/orders/{order['id']}", OperationType.UPDATE, ActionStatus.SUCCESS),
        (4, f"DELETE /v1/orders/{order['id']}", OperationType.DELETE, ActionStatus.SUCCESS),
    ]
    assert actions[0].payload["body"] == {"sku": "A1"}
    assert actions[0].payload["query"] == {"expand": "items"}
    assert actions[0].response is not None and actions[0].response["body"]["id"] == order["id"]


def test_write_ahead_record_exists_before_the_call_reaches_the_service(ar: AgentRein) -> None:
    seen: list[list[str]] = []
    session = ar.new_session(agent_id="a", intent="i")

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append([a.status for a in ar.get_session(session).actions])
        return httpx.Response(201, json={"id": "x1"})

    client = ar.wrap(httpx.Client(transport=httpx.MockTransport(handler)), session, connector="http")
    client.post("https://api.test/v1/x", json={})
    assert seen == [[ActionStatus.CLEARED]]
    assert [a.status for a in ar.get_session(session).actions] == [ActionStatus.SUCCESS]


def test_every_request_carries_the_actions_idempotency_key(ar: AgentRein, service: FakeService) -> None:
    client, session_id = wrapped(ar, service)
    client.post("/v1/orders", json={"sku": "A1"})
    client.post("/v1/orders", json={"sku": "A2"})
    actions = ar.get_session(session_id).actions
    keys = [r.idempotency_key for r in service.calls("POST")]
    assert keys == [a.idempotency_key for a in actions]
    assert len(set(keys)) == 2


def test_create_undo_is_a_delete_of_the_location_header(ar: AgentRein, service: FakeService) -> None:
    client, session_id = wrapped(ar, service)
    thing = client.post("/v1/things", json={"name": "t"}).json()
    action = ar.get_session(session_id).actions[0]
    assert action.undo is not None
    assert (action.undo.type, action.undo.params) == (
        "http-delete",
        {"url": f"{service.base_url}/v1/things/{thing['id']}"},
    )


def test_create_undo_falls_back_to_the_request_path_and_the_json_id(ar: AgentRein, service: FakeService) -> None:
    client, session_id = wrapped(ar, service)
    order = client.post("/v1/orders?x=1", json={"sku": "A1"}).json()
    undo = ar.get_session(session_id).actions[0].undo
    assert undo is not None and undo.params == {"url": f"{service.base_url}/v1/orders/{order['id']}"}


def test_updates_and_deletes_are_logged_with_undo_none(ar: AgentRein, service: FakeService) -> None:
    client, session_id = wrapped(ar, service)
    order = client.post("/v1/orders", json={"sku": "A1"}).json()
    client.patch(f"/v1/orders/{order['id']}", json={"sku": "B"})
    undo = ar.get_session(session_id).actions[1].undo
    assert undo is not None and undo.type == "none"


def test_a_call_whose_undo_its_connector_refuses_is_still_recorded_as_done_with_no_undo(
    ar: AgentRein, service: FakeService
) -> None:
    """The call ran: its record must say so (never left CLEARED, which no rollback undoes), and no undo the
    connector refuses (here one to a non-HTTP URL) is stored to be run later."""
    client, session_id = wrapped(ar, service, undo={"POST /v1/orders": {"url": "ftp://elsewhere.example/x"}})
    client.post("/v1/orders", json={"sku": "A1"})
    (action,) = ar.get_session(session_id).actions
    assert action.status is ActionStatus.SUCCESS
    assert action.undo is not None and action.undo.is_none


def test_an_undo_whose_url_lost_a_token_to_redaction_fails_rather_than_passing_for_done(
    ar: AgentRein, service: FakeService
) -> None:
    """A token in the path is not stored, so the stored undo is not the inverse the call had: sent as stored,
    its 404 would read as "already gone" while the resource stays. It is refused, and the rollback says so."""
    client, session_id = wrapped(ar, service)
    created = client.post("/v1/aB1cD2eF3gH4iJ5kL6mN7oP8", json={}).json()  # a collection named by a token
    (action,) = ar.get_session(session_id).actions
    assert action.undo is not None and action.undo.params["url"].endswith(f"/v1/[REDACTED]/{created['id']}")
    with pytest.raises(RollbackFailedError) as failed:
        ar.rollback_session(session_id)
    (undone,) = failed.value.session.actions
    assert undone.status is ActionStatus.ROLLBACK_FAILED and undone.undo_status is UndoStatus.FAILED
    assert undone.error is not None and "its url held a secret, which AgentRein does not store" in undone.error
    assert service.calls("DELETE") == [] and created["id"] in service.collection("aB1cD2eF3gH4iJ5kL6mN7oP8")


def test_an_undo_whose_json_body_lost_a_secret_to_redaction_is_refused_rather_than_sent(
    ar: AgentRein, service: FakeService
) -> None:
    cancel = {"type": "http-request", "method": "POST", "path": "/v1/orders/{id}/cancel"}
    undo = {"POST /v1/orders": cancel | {"json": {"note": "sign with db_pw: letmein-db-pw", "sku": "A1"}}}
    client, session_id = wrapped(ar, service, undo=undo)
    client.post("/v1/orders", json={"sku": "A1"})
    (action,) = ar.get_session(session_id).actions
    assert action.undo is not None and action.undo.params["json"] == {
        "note": "sign with db_pw: [REDACTED]",
        "sku": "A1",
    }
    with pytest.raises(RollbackFailedError) as failed:
        ar.rollback_session(session_id)
    (undone,) = failed.value.session.actions
    assert undone.error is not None and "its json.note held a secret, which AgentRein does not store" in undone.error
    assert service.calls("POST", "*/cancel") == []


def test_caller_can_override_an_undo_with_a_template_and_an_approval_flag(ar: AgentRein, service: FakeService) -> None:
    client, session_id = wrapped(
        ar,
        service,
        undo={
            "POST /v1/orders": {"type": "http-request", "method": "POST", "path": "/v1/orders/{id}/cancel"},
            "POST /v1/things": {"requireApproval": True},
        },
    )
    order = client.post("/v1/orders", json={"sku": "A1"}).json()
    client.post("/v1/things", json={"name": "t"})
    first, second = ar.get_session(session_id).actions
    assert first.undo is not None and first.undo.type == "http-request"
    assert first.undo.params == {
        "method": "POST",
        "url": f"{service.base_url}/v1/orders/{order['id']}/cancel",
    }
    assert second.undo is not None and (second.undo.type, second.undo.require_approval) == (
        "http-delete",
        True,
    )


def test_an_error_status_fails_the_action_rolls_back_and_raises_http_status_error(
    ar: AgentRein, service: FakeService
) -> None:
    client, session_id = wrapped(ar, service)
    order = client.post("/v1/orders", json={"sku": "A1"}).json()
    with pytest.raises(httpx.HTTPStatusError) as raised:
        client.delete("/v1/orders/ord_missing")
    assert raised.value.response.status_code == 404
    session = ar.get_session(session_id)
    assert [a.status for a in session.actions] == [ActionStatus.ROLLED_BACK, ActionStatus.FAILED]
    assert "404" in (session.actions[1].error or "")
    assert session.status is SessionStatus.ROLLED_BACK
    assert session.display_status is DisplayStatus.REVERTED
    assert order["id"] not in service.collection("orders")


def test_a_failed_calls_error_is_recorded_without_the_token_of_its_url(ar: AgentRein, service: FakeService) -> None:
    client, session_id = wrapped(ar, service)
    with pytest.raises(httpx.HTTPStatusError) as raised:
        client.delete("/v1/orders/ord_missing", params={"access_token": "tok-in-query"})
    assert "tok-in-query" in str(raised.value)  # the agent sees its own error as it was
    (action,) = ar.get_session(session_id).actions
    assert action.error is not None and "404" in action.error
    assert "tok-in-query" not in action.error and "access_token=[REDACTED]" in action.error


def test_secret_headers_keys_and_query_parameters_are_not_recorded(ar: AgentRein, service: FakeService) -> None:
    client, session_id = wrapped(ar, service)
    headers = {"X-Auth-Key": "h1-secret", "Ocp-Apim-Subscription-Key": "h2-secret", "X-Session-Token": "h3-secret"}
    body = {"user": "bob", "passphrase": "p1", "pass": "p2", "pin": "p3"}
    client.post("/v1/orders", params={"sig": "q-secret"}, json=body, headers=headers)
    stored = repr([(a.payload, a.error) for a in ar.get_session(session_id).actions])
    planted = (
        "h1-secret",
        "h2-secret",
        "h3-secret",
        "q-secret",
        "'p1'",
        "'p2'",
        "'p3'",
    )
    assert [p for p in planted if p in stored] == []
    assert "bob" in stored  # what is no secret is kept


def test_a_transport_error_is_reraised_unchanged_after_rollback(ar: AgentRein, service: FakeService) -> None:
    client, session_id = wrapped(ar, service)
    client.post("/v1/orders", json={"sku": "A1"})
    service.fail_next("POST", "/v1/orders", status=None)  # drop the connection
    with pytest.raises(httpx.RemoteProtocolError):
        client.post("/v1/orders", json={"sku": "A2"})
    statuses = [a.status for a in ar.get_session(session_id).actions]
    assert statuses == [ActionStatus.ROLLED_BACK, ActionStatus.FAILED]
    assert service.collection("orders") == {}


def test_transient_failures_of_retryable_calls_are_retried_with_the_same_key(
    ar: AgentRein, service: FakeService
) -> None:
    client, session_id = wrapped(ar, service, retryable=["POST /v1/orders"])
    service.fail_next("POST", "/v1/orders", status=503, times=2)
    order = client.post("/v1/orders", json={"sku": "A1"}).json()
    attempts = service.calls("POST", "/v1/orders")
    assert len(attempts) == 3
    assert len({a.idempotency_key for a in attempts}) == 1
    action = ar.get_session(session_id).actions[0]
    assert action.status is ActionStatus.SUCCESS and action.response is not None
    assert action.response["body"]["id"] == order["id"]


def test_a_retry_after_a_lost_response_does_not_create_twice(ar: AgentRein, service: FakeService) -> None:
    client, _ = wrapped(ar, service, retryable=["POST *"])
    service.fail_next("POST", "/v1/orders", status=502, after_effect=True)
    client.post("/v1/orders", json={"sku": "A1"})
    assert len(service.calls("POST")) == 2
    assert len(service.collection("orders")) == 1


def test_calls_not_listed_as_retryable_are_not_retried(ar: AgentRein, service: FakeService) -> None:
    client, _ = wrapped(ar, service, retryable=["POST /v1/other"])
    service.fail_next("POST", "/v1/orders", status=503)
    with pytest.raises(httpx.HTTPStatusError):
        client.post("/v1/orders", json={"sku": "A1"})
    assert len(service.calls("POST")) == 1


def test_client_errors_are_not_retried_even_when_retryable(ar: AgentRein, service: FakeService) -> None:
    client, _ = wrapped(ar, service, retryable=["*"])
    service.fail_next("POST", "/v1/orders", status=400)
    with pytest.raises(httpx.HTTPStatusError):
        client.post("/v1/orders", json={"sku": "A1"})
    assert len(service.calls("POST")) == 1


def test_secrets_are_redacted_from_stored_payloads_and_responses(ar: AgentRein, service: FakeService) -> None:
    session = ar.new_session(agent_id="a", intent="i")
    raw = httpx.Client(base_url=service.base_url, headers={"Authorization": "Bearer sk_live_123"})
    client = ar.wrap(raw, session, connector="http")
    client.post(
        "/v1/users",
        json={
            "email": "a@b.c",
            "password": "hunter2",
            "card": {"number": "4242 4242 4242 4242"},
            "api_key": "k",
            "nested": [{"client_secret": "s"}],
        },
        headers={"X-Api-Key": "abc"},
    )
    action = ar.get_session(session).actions[0]
    stored = repr(action.payload) + repr(action.response)
    for secret in ("hunter2", "4242 4242 4242 4242", "sk_live_123", "'k'", "'s'", "abc"):
        assert secret not in stored
    assert action.payload["body"]["email"] == "a@b.c"
    assert action.payload["body"]["password"] == "[REDACTED]"
    assert action.payload["headers"]["authorization"] == "[REDACTED]"
    # the service itself got the real values
    assert service.calls("POST")[0].body["password"] == "hunter2"


def test_unknown_connector_names_the_installed_ones(ar: AgentRein) -> None:
    session = ar.new_session(agent_id="a", intent="i")
    with pytest.raises(UnknownConnectorError, match=r"installed: .*http"):
        ar.wrap(httpx.Client(), session, connector="nope")


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"failure_mode": "sideways"}, "failure_mode"),
        ({"timeout_ms": 0}, "timeout_ms"),
        ({"requires_approval": "DELETE *"}, "requires_approval"),
        ({"retryable": ["POST [x"]}, "retryable"),
        ({"undo": {"POST /x": {"type": "teleport"}}}, "undo['POST /x'].type"),
        ({"undo": {"POST /x": {"requireApproval": "yes"}}}, "undo['POST /x'].requireApproval"),
    ],
)
def test_bad_wrap_options_name_the_field(ar: AgentRein, options: dict[str, object], field: str) -> None:
    session = ar.new_session(agent_id="a", intent="i")
    with pytest.raises(ValidationError) as raised:
        ar.wrap(httpx.Client(), session, connector="http", **options)  # type: ignore[arg-type]
    assert raised.value.field == field


def test_the_http_connector_refuses_a_client_that_is_not_httpx(ar: AgentRein) -> None:
    session = ar.new_session(agent_id="a", intent="i")
    with pytest.raises(ValidationError, match="cannot wrap a dict"):
        ar.wrap({}, session, connector="http")


def test_undo_status_starts_as_none_on_success(ar: AgentRein, service: FakeService) -> None:
    client, session_id = wrapped(ar, service)
    client.post("/v1/orders", json={})
    assert ar.get_session(session_id).actions[0].undo_status is UndoStatus.NONE


def test_a_wrapped_client_is_truthy_like_the_client(ar: AgentRein, service: FakeService) -> None:
    session = ar.new_session(agent_id="a", intent="i")
    client = ar.wrap(httpx.Client(base_url=service.base_url), session, connector="http")
    assert bool(client) and (client or None) is client


def test_a_session_longer_than_a_page_is_read_with_every_action_in_order(ar: AgentRein) -> None:
    """A server shows a long session's first 100 actions; ``get_session`` reads the rest a page at a time."""
    session = ar.new_session(agent_id="a", intent="many calls")
    client = ar.wrap(
        httpx.Client(transport=httpx.MockTransport(lambda _: httpx.Response(201, json={}))), session, connector="http"
    )
    for n in range(130):
        client.post(f"https://api.test/v1/x/{n}", json={})
    read = ar.get_session(session)
    assert [a.seq for a in read.actions] == list(range(1, 131))
    assert read.actions[-1].api_name == "POST /v1/x/129"
    assert read.action_count == 130 and read.actions_cursor is None

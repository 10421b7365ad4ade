"""Notifications: signed webhook deliveries to a loopback receiver that checks them as the README says,
retries and the delivery log, URL checks, and the agentrein_notify hook for plugins."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from peers import FakeModel, WebhookReceiver, eventually, operator
from serving import RunningServer, Tenant, free_port

from agentrein_core.connector import hookimpl
from agentrein_core.model import Event
from agentrein_core.plugins import Connectors, new_plugin_manager
from agentrein_core.statuses import Role
from agentrein_core.targets import ALLOW_PRIVATE_ENV
from agentrein_testing import FakeService


@pytest.fixture
def tenant(server: RunningServer, monkeypatch: pytest.MonkeyPatch) -> Tenant:
    monkeypatch.setattr(server.engine.outbox, "delivery_retry_after", (timedelta(seconds=0.2),) * 3)
    tenant = server.tenant()
    assert operator(tenant).patch("/settings", json={"webhookHosts": ["127.0.0.1"]}).status_code == 200
    return tenant


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver().running() as running:
        yield running


def subscribe(tenant: Tenant, receiver: WebhookReceiver, events: list[str], **extra: Any) -> dict[str, Any]:
    made = operator(tenant).post("/webhooks", json={"url": receiver.url + "/hook", "events": events, **extra})
    assert made.status_code == 201, made.text
    hook: dict[str, Any] = made.json()
    receiver.secret = hook["secret"]
    return hook


def held_action(tenant: Tenant) -> dict[str, Any]:
    api = operator(tenant)
    session_id = api.post("/sessions", json={"agentId": "billing-agent", "intent": "Refund order 7"}).json()["id"]
    body = {"connector": "http", "apiName": "POST /v1/refunds", "operationType": "CREATE", "payload": {}}
    logged: dict[str, Any] = api.post(f"/sessions/{session_id}/actions", json={**body, "requiresApproval": True}).json()
    return logged


def bodies(receiver: WebhookReceiver) -> list[dict[str, Any]]:
    return [json.loads(r.body) for r in receiver.accepted()]


def test_approval_events_arrive_signed_and_pass_the_readme_check(tenant: Tenant, receiver: WebhookReceiver) -> None:
    hook = subscribe(tenant, receiver, ["approval.requested", "approval.decided"])
    assert hook["secret"].startswith("whsec_") and hook["events"] == ["approval.decided", "approval.requested"]
    logged = held_action(tenant)
    approval_id = logged["approval"]["approvalId"]
    eventually(lambda: bodies(receiver), lambda b: len(b) == 1)
    operator(tenant).post(f"/approvals/{approval_id}/approve", json={"reviewer": "lead"})
    requested, decided = eventually(lambda: bodies(receiver), lambda b: len(b) == 2)
    assert requested["type"] == "approval.requested" and requested["data"]["approvalId"] == approval_id
    assert requested["data"]["sessionIntent"] == "Refund order 7" and requested["organisationId"] == tenant.org_id
    assert decided["type"] == "approval.decided" and decided["data"]["status"] == "APPROVED"
    first = receiver.accepted()[0]
    assert first.headers["agentrein-event"] == "approval.requested" and first.path == "/hook"
    assert [r.accepted for r in receiver.received] == [True, True]


def test_an_approval_requested_event_carries_no_secret_a_raw_client_sent(
    tenant: Tenant, receiver: WebhookReceiver
) -> None:
    subscribe(tenant, receiver, ["approval.requested"])
    api = operator(tenant)
    session_id = api.post("/sessions", json={"agentId": "raw", "intent": "Refund"}).json()["id"]
    payload = {"password": "hunter2-pw", "memo": "4242424242424242", "amount": 5}
    body = {"connector": "http", "apiName": "POST /v1/refunds", "operationType": "CREATE", "payload": payload}
    assert api.post(f"/sessions/{session_id}/actions", json={**body, "requiresApproval": True}).status_code == 201
    (requested,) = eventually(lambda: bodies(receiver), lambda b: len(b) == 1)
    delivered = json.dumps(requested)
    assert "hunter2-pw" not in delivered and "4242424242424242" not in delivered
    assert "amount" in delivered  # the summary is there, without its secrets


def test_a_failing_endpoint_is_retried_and_the_log_shows_each_delivery(
    tenant: Tenant, receiver: WebhookReceiver
) -> None:
    hook = subscribe(tenant, receiver, ["approval.requested"])
    receiver.failures = 2
    held_action(tenant)
    eventually(lambda: receiver.accepted(), bool)
    log = eventually(
        lambda: operator(tenant).get(f"/webhooks/{hook['webhookId']}/deliveries").json(),
        lambda entries: entries and entries[0]["status"] == "DELIVERED",
    )
    (delivery,) = log
    assert (delivery["status"], delivery["attempts"], delivery["lastStatus"]) == ("DELIVERED", 3, 204)
    assert delivery["eventType"] == "approval.requested"
    assert len(receiver.received) == 3  # two 500s, then delivered


def test_an_endpoint_that_never_answers_is_given_up_after_the_last_retry(tenant: Tenant) -> None:
    api = operator(tenant)
    made = api.post("/webhooks", json={"url": f"http://127.0.0.1:{free_port()}/gone", "events": ["*"]}).json()
    held_action(tenant)
    log = eventually(
        lambda: api.get(f"/webhooks/{made['webhookId']}/deliveries").json(),
        lambda entries: entries and entries[0]["status"] == "FAILED",
    )
    assert log[0]["attempts"] == 4 and "ConnectError" in log[0]["lastError"]


def test_a_replayed_or_altered_delivery_fails_the_readme_check(tenant: Tenant, receiver: WebhookReceiver) -> None:
    subscribe(tenant, receiver, ["approval.requested"])
    receiver.tolerance = 1
    held_action(tenant)
    (original,) = eventually(lambda: receiver.accepted(), bool)
    signed = {"AgentRein-Signature": original.headers["agentrein-signature"], "content-type": "application/json"}
    altered = httpx.post(receiver.url + "/hook", content=original.body.replace(b"APPROVAL", b"X"), headers=signed)
    assert altered.status_code == 400
    time.sleep(2.1)  # past the receiver's tolerance
    replayed = httpx.post(receiver.url + "/hook", content=original.body, headers=signed)
    assert replayed.status_code == 400
    assert len(receiver.accepted()) == 1


def test_slack_format_sends_text_with_a_link_to_the_approval(tenant: Tenant, receiver: WebhookReceiver) -> None:
    subscribe(tenant, receiver, ["approval.requested"], format="slack")
    approval_id = held_action(tenant)["approval"]["approvalId"]
    (message,) = eventually(lambda: bodies(receiver), bool)
    assert set(message) == {"text"}
    assert "Approval needed: CREATE POST /v1/refunds by billing-agent" in message["text"]
    assert f"/dashboard/approvals#approval-{approval_id}|Open in AgentRein>" in message["text"]


@pytest.mark.parametrize(
    ("hosts", "url", "events", "detail"),
    [
        ([], "http://127.0.0.1:9/x", ["*"], "no webhook hosts are allowed yet"),
        (["hooks.example.com"], "http://127.0.0.1:9/x", ["*"], "not among the organisation's webhookHosts"),
        (["127.0.0.1"], "ftp://127.0.0.1/x", ["*"], "not an http or https URL"),
        (["127.0.0.1"], "http://user:pw@127.0.0.1/x", ["*"], "user name or password"),
        (["127.0.0.1"], "http://127.0.0.1:9/x", ["approval.exploded"], "is not an event"),
        (["127.0.0.1"], "http://127.0.0.1:9/x", [], "must list some of"),
        (["*.example.com"], "http://169.254.169.254/latest/meta-data", ["*"], "not among"),
    ],
)
def test_webhook_urls_and_events_are_checked(
    server: RunningServer, hosts: list[str], url: str, events: list[str], detail: str
) -> None:
    api = operator(server.tenant())
    api.patch("/settings", json={"webhookHosts": hosts})
    refused = api.post("/webhooks", json={"url": url, "events": events})
    assert refused.status_code == 400
    assert detail in refused.json()["detail"]
    assert api.get("/webhooks").json() == []


@pytest.mark.parametrize(
    ("entry", "allowed", "refused"),
    [
        ("127.0.0.1:8080", "http://127.0.0.1:8080/x", "http://127.0.0.1:8081/x"),
        ("[::1]", "http://[::1]:9/x", "http://127.0.0.1:9/x"),
        ("[::1]:8080", "http://[::1]:8080/x", "http://[::1]:8081/x"),
        ("::1", "http://[::1]/x", "http://127.0.0.1/x"),
    ],
)
def test_a_webhook_host_takes_a_port_or_a_bracketed_ipv6_address_as_allowed_hosts_do(
    server: RunningServer, entry: str, allowed: str, refused: str
) -> None:
    api = operator(server.tenant())
    assert api.put("/connectors/http", json={"enabled": True, "config": {"allowedHosts": [entry]}}).status_code == 200
    stored = api.patch("/settings", json={"webhookHosts": [entry]})
    assert stored.status_code == 200 and stored.json()["webhookHosts"] == [entry], stored.text
    assert api.post("/webhooks", json={"url": allowed, "events": ["rollback.completed"]}).status_code == 201
    outside = api.post("/webhooks", json={"url": refused, "events": ["rollback.completed"]})
    assert outside.status_code == 400 and "not among the organisation's webhookHosts" in outside.json()["detail"]


@pytest.mark.parametrize(
    "entry", ["*:443", "*", "[hooks.example.com]", "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:", "[::1]x", "[::1"]
)
def test_a_webhook_host_is_refused_as_the_same_allowed_host_is(server: RunningServer, entry: str) -> None:
    api = operator(server.tenant())
    as_allowed_host = api.put("/connectors/http", json={"enabled": True, "config": {"allowedHosts": [entry]}})
    as_webhook_host = api.patch("/settings", json={"webhookHosts": [entry]})
    assert (as_allowed_host.status_code, as_webhook_host.status_code) == (400, 400), as_webhook_host.text
    assert as_webhook_host.json()["field"] == "webhookHosts"
    assert as_webhook_host.json()["detail"] == as_allowed_host.json()["detail"].replace(
        "config.allowedHosts", "webhookHosts"
    )
    assert api.get("/settings").json()["webhookHosts"] == []


def test_deliveries_reach_a_webhook_host_allowed_with_its_port(tenant: Tenant, receiver: WebhookReceiver) -> None:
    port = httpx.URL(receiver.url).port
    assert operator(tenant).patch("/settings", json={"webhookHosts": [f"127.0.0.1:{port}"]}).status_code == 200
    subscribe(tenant, receiver, ["approval.requested"])
    held_action(tenant)
    (delivered,) = eventually(receiver.accepted, bool)
    assert json.loads(delivered.body)["type"] == "approval.requested"


@pytest.mark.parametrize("url", ["http://127.0.0.1:9/x", "http://localhost:9/x", "http://[::ffff:10.0.0.1]/x"])
def test_private_addresses_are_refused_unless_the_server_allows_them(
    server: RunningServer, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ALLOW_PRIVATE_ENV)
    api = operator(server.tenant())
    api.patch("/settings", json={"webhookHosts": ["127.0.0.1", "localhost", "::ffff:10.0.0.1"]})
    refused = api.post("/webhooks", json={"url": url, "events": ["*"]})
    assert refused.status_code == 400 and "private or local address" in refused.json()["detail"]


def test_a_host_that_turns_private_after_registration_is_not_sent_to(
    tenant: Tenant, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    hook = subscribe(tenant, receiver, ["approval.requested"])
    monkeypatch.delenv(ALLOW_PRIVATE_ENV)  # as if its name now resolved to a private address
    held_action(tenant)
    log = eventually(
        lambda: operator(tenant).get(f"/webhooks/{hook['webhookId']}/deliveries").json(),
        lambda entries: entries and entries[0]["attempts"] >= 1,
    )
    assert "not sent" in log[0]["lastError"] and "private or local address" in log[0]["lastError"]
    assert receiver.received == []


def test_a_malformed_url_is_a_clear_error(tenant: Tenant) -> None:
    for url in ("http://[zz/x", "http://127.0.0.1:bad/x", "http://127.0.0.1/a\x00b"):
        refused = operator(tenant).post("/webhooks", json={"url": url, "events": ["*"]})
        assert refused.status_code == 400, url


def test_agent_keys_cannot_read_webhooks_or_settings(server: RunningServer, tenant: Tenant) -> None:
    agent = httpx.Client(base_url=tenant.url, headers={"Authorization": f"Bearer {server.key(tenant, Role.AGENT)}"})
    for path in ("/webhooks", "/settings"):
        assert agent.get(path).status_code == 403, path


def test_slack_text_cannot_mention_or_link(tenant: Tenant, receiver: WebhookReceiver) -> None:
    subscribe(tenant, receiver, ["approval.requested"], format="slack")
    api = operator(tenant)
    session_id = api.post("/sessions", json={"agentId": "<!channel>", "intent": "<http://evil|Approve>"}).json()["id"]
    body = {
        "connector": "http",
        "apiName": "POST /x",
        "operationType": "CREATE",
        "payload": {},
        "requiresApproval": True,
    }
    api.post(f"/sessions/{session_id}/actions", json=body)
    (message,) = eventually(lambda: bodies(receiver), bool)
    assert "<!channel>" not in message["text"] and "<http://evil" not in message["text"]
    assert "&lt;!channel&gt;" in message["text"]


def test_the_secret_is_shown_once_and_other_organisations_see_nothing(
    server: RunningServer, tenant: Tenant, receiver: WebhookReceiver
) -> None:
    hook = subscribe(tenant, receiver, ["*"])
    (listed,) = operator(tenant).get("/webhooks").json()
    assert "secret" not in listed and listed["webhookId"] == hook["webhookId"]
    stored = server.engine.outbox.list_webhooks(tenant.org_id)[0].secret
    assert hook["secret"] not in stored  # encrypted at rest
    other = operator(server.tenant())
    assert other.get(f"/webhooks/{hook['webhookId']}/deliveries").status_code == 404
    assert other.delete(f"/webhooks/{hook['webhookId']}").status_code == 404
    assert operator(tenant).delete(f"/webhooks/{hook['webhookId']}").status_code == 204
    assert operator(tenant).get("/webhooks").json() == []


def test_a_dead_endpoint_never_holds_up_an_approval_or_a_rollback(tenant: Tenant, service: FakeService) -> None:
    api = operator(tenant)
    api.post("/webhooks", json={"url": f"http://127.0.0.1:{free_port()}/down", "events": ["*"]})
    ar = tenant.client()
    session = ar.new_session(agent_id="a", intent="Create orders")
    client = ar.wrap(httpx.Client(base_url=service.base_url), session, connector="http")
    client.post("/v1/orders", json={})
    rolled_back = ar.rollback_session(session)
    assert rolled_back.display_status == "REVERTED"
    ar.close()


def test_rollback_and_drift_events_are_delivered(
    tenant: Tenant, receiver: WebhookReceiver, service: FakeService
) -> None:
    with FakeModel(
        answer=lambda _: {"outcome": "DRIFT_DETECTED", "rationale": "Not what was asked."}
    ).running() as model:
        operator(tenant).patch("/settings", json={"verifierUrl": model.url, "verifierModel": "m", "onDrift": "none"})
        subscribe(tenant, receiver, ["rollback.completed", "drift.detected"])
        ar = tenant.client()
        session = ar.new_session(agent_id="a", intent="Create one order")
        client = ar.wrap(httpx.Client(base_url=service.base_url), session, connector="http")
        client.post("/v1/orders", json={})
        drift = eventually(lambda: [b for b in bodies(receiver) if b["type"] == "drift.detected"], bool)
        assert drift[0]["data"]["rationale"] == "Not what was asked." and drift[0]["data"]["sessionId"] == session.id
        ar.rollback_session(session)
        done = eventually(lambda: [b for b in bodies(receiver) if b["type"] == "rollback.completed"], bool)
        assert done[0]["data"]["sessionId"] == session.id and done[0]["data"]["status"] == "SUCCEEDED"
        assert "leaseToken" not in done[0]["data"]
        ar.close()


class Listener:
    """A notify plugin, registered like any other."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    @hookimpl
    def agentrein_notify(self, event: Event) -> None:
        self.events.append(event)


def test_notify_plugins_hear_every_event_once(tmp_path: Path) -> None:
    listener = Listener()
    pm = new_plugin_manager()
    pm.register(listener, "listener")
    server = RunningServer(f"sqlite:///{tmp_path / 'notify.db'}", connectors=Connectors(pm))
    try:
        tenant = server.tenant()
        approval_id = held_action(tenant)["approval"]["approvalId"]
        operator(tenant).post(f"/approvals/{approval_id}/reject", json={"reason": "no"})
        heard = eventually(lambda: [e.type.value for e in listener.events], lambda types: len(types) >= 2)
        time.sleep(0.6)  # a second dispatch round would repeat them
        assert heard == ["approval.requested", "approval.decided"]
        assert [e.type.value for e in listener.events] == heard
    finally:
        server.stop()

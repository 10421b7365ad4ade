"""Log lines carry no secret the store would not keep: the lines of the server's own http client (webhook
deliveries, verifier calls), and AgentRein's own lines in the SDK, embedded and through the server."""

from __future__ import annotations

import logging

import httpx
import pytest
from peers import FakeModel, WebhookReceiver, eventually, operator
from serving import RunningServer, Tenant

from agentrein import AgentRein
from agentrein_testing import FakeService

SLACK_TOKEN = "aB1cD2eF3gH4iJ5kL6mN7oP8"
SHORT_TOKEN = "k3j9x2"


@pytest.fixture
def tenant(server: RunningServer) -> Tenant:
    tenant = server.tenant()
    assert operator(tenant).patch("/settings", json={"webhookHosts": ["127.0.0.1"]}).status_code == 200
    return tenant


def test_the_servers_log_line_of_a_webhook_delivery_hides_the_token_in_its_url(
    tenant: Tenant, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="httpx")
    with WebhookReceiver().running() as receiver:
        url = f"{receiver.url}/services/T1/B1/{SLACK_TOKEN}"
        made = operator(tenant).post("/webhooks", json={"url": url, "events": ["*"]})
        assert made.status_code == 201, made.text
        receiver.secret = made.json()["secret"]
        api = operator(tenant)  # an approval request is an event every webhook of "*" is sent
        session_id = api.post("/sessions", json={"agentId": "a", "intent": "i"}).json()["id"]
        body = {"connector": "http", "apiName": "POST /v1/x", "operationType": "CREATE", "requiresApproval": True}
        assert api.post(f"/sessions/{session_id}/actions", json=body).status_code == 201
        eventually(receiver.accepted, bool)
        logged = eventually(lambda: caplog.text, lambda text: "/services/T1/B1/" in text)
    assert f"HTTP Request: POST {receiver.url}/services/T1/B1/[REDACTED]" in logged
    assert SLACK_TOKEN not in logged


def test_the_servers_log_line_of_a_verifier_call_hides_the_token_in_its_url(
    tenant: Tenant, caplog: pytest.LogCaptureFixture, service: FakeService
) -> None:
    caplog.set_level(logging.INFO, logger="httpx")
    with FakeModel().running() as model:
        verifier = model.url.replace("/v1", f"/proxy/token/{SHORT_TOKEN}/v1")  # the fake answers on any path
        settings = {"verifierUrl": verifier, "verifierModel": "m", "onDrift": "none"}
        assert operator(tenant).patch("/settings", json=settings).status_code == 200
        ar = tenant.client()
        session = ar.new_session(agent_id="a", intent="Create one order")
        ar.wrap(httpx.Client(base_url=service.base_url), session, connector="http").post("/v1/orders", json={})
        eventually(lambda: model.requests, bool)
        logged = eventually(lambda: caplog.text, lambda text: "/proxy/token/" in text)
        ar.close()
    assert "/proxy/token/[REDACTED]/v1/chat/completions" in logged
    assert f"/{SHORT_TOKEN}/" not in logged


def test_the_sdks_warning_about_a_call_hides_the_token_in_its_path(
    ar: AgentRein, service: FakeService, caplog: pytest.LogCaptureFixture
) -> None:
    session = ar.new_session(agent_id="a", intent="post a message")
    undo = {"POST /v1/*": {"url": "ftp://elsewhere.example/x"}}  # an undo the connector refuses: warned about
    client = ar.wrap(httpx.Client(base_url=service.base_url), session, connector="http", undo=undo)
    with caplog.at_level(logging.WARNING, logger="agentrein"):
        client.post(f"/v1/{SLACK_TOKEN}", json={})
    assert "AgentRein cannot undo POST /v1/[REDACTED]" in caplog.text
    assert SLACK_TOKEN not in caplog.text

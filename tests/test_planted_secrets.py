"""Secrets planted in free text that people and agents write (a session's intent, a reviewer's reason, a
withdrawal, a rollback's reason) are stored redacted, embedded and through the server, on both databases, and
read back through no path: the SDK, the REST API, the dashboard, webhook bodies, the command line. The words
around them are kept."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from dashboard import account, visitor
from peers import WebhookReceiver, eventually, operator
from serving import RunningServer, Tenant
from typer.testing import CliRunner

from agentrein import AgentRein
from agentrein_cli.main import app
from agentrein_testing import FakeService

CARD = "4242 4242 4242 4242"
GITHUB_TOKEN = "ghp_aB1cD2eF3gH4iJ5kL6mN7oP8qR9sT0uV1wX2"
STRIPE_KEY = "sk_live_51HqLyjWDarjtT1zdp7dc"
PLANTED = f"refund card {CARD}, use token {GITHUB_TOKEN} or key {STRIPE_KEY}"
KEPT = "refund card [REDACTED], use token [REDACTED] or key [REDACTED]"
#: None of these may be read back: the secrets whole, without their spaces, or cut short.
SECRETS = (CARD, CARD.replace(" ", ""), GITHUB_TOKEN, GITHUB_TOKEN[:12], STRIPE_KEY, STRIPE_KEY[:12])


def assert_no_secret(text: str) -> None:
    assert not [s for s in SECRETS if s in text], text


# embedded and through the server --------------------------------------------------------------------------
def test_an_intent_keeps_its_words_but_not_its_card_or_token(ar: AgentRein) -> None:
    session = ar.new_session(agent_id="billing-agent", intent=PLANTED)
    assert session.intent == KEPT
    assert ar.get_session(session).intent == KEPT
    assert [s.intent for s in ar.list_sessions()] == [KEPT]


def test_a_reviewers_reason_keeps_its_words_but_not_its_secrets(ar: AgentRein, service: FakeService) -> None:
    ar.add_policy(name="review refunds", effect="REQUIRE_APPROVAL", api_name="POST /v1/refunds")
    session = ar.new_session(agent_id="billing-agent", intent="Refund order 7")
    ar.wrap(httpx.Client(base_url=service.base_url), session, connector="http").post("/v1/refunds", json={})
    (pending,) = ar.list_approvals(status="PENDING")
    decided = ar.approve(pending.approval_id, reviewer="lead@example.com", reason=PLANTED)
    assert decided.reason == KEPT and ar.get_approval(pending.approval_id).reason == KEPT
    assert [a.reason for a in ar.get_session(session).approvals] == [KEPT]


# through the server: every way of reading it back --------------------------------------------------------
@pytest.fixture
def tenant(server: RunningServer) -> Tenant:
    tenant = server.tenant()
    assert operator(tenant).patch("/settings", json={"webhookHosts": ["127.0.0.1"]}).status_code == 200
    return tenant


@pytest.fixture
def receiver(tenant: Tenant) -> Iterator[WebhookReceiver]:
    """Every event of the tenant, delivered to a loopback receiver."""
    with WebhookReceiver().running() as running:
        made = operator(tenant).post("/webhooks", json={"url": running.url + "/hook", "events": ["*"]})
        assert made.status_code == 201, made.text
        running.secret = made.json()["secret"]
        yield running


def delivered(receiver: WebhookReceiver, event_type: str) -> list[dict[str, Any]]:
    """The bodies of the deliveries so far, once one of ``event_type`` has arrived."""

    def bodies() -> list[dict[str, Any]]:
        return [json.loads(r.body) for r in receiver.accepted()]

    found: list[dict[str, Any]] = eventually(bodies, lambda b: any(e["type"] == event_type for e in b))
    assert any(e["type"] == event_type for e in found), found
    return found


def read_back_without_secrets(server: RunningServer, tenant: Tenant, session_id: str, events: Any) -> str:
    """Everything an operator can read of the session (the REST API, the dashboard's pages, the command line)
    and the webhook ``events``, as one text, checked to hold none of the planted secrets."""
    api = operator(tenant)
    answers = [api.get(f"/sessions/{session_id}"), api.get("/sessions"), api.get("/approvals")]
    answers += [api.get(f"/approvals/{a['approvalId']}") for a in answers[-1].json()]
    answers += [api.get(f"/sessions/{session_id}/rollback")]
    texts = [answer.text for answer in answers]
    with visitor(server, account(server, tenant)) as browser:
        for page in (f"/dashboard/sessions/{session_id}", "/dashboard/sessions", "/dashboard/approvals"):
            shown = browser.get(page)
            assert shown.status_code == 200, page
            texts.append(shown.text)
    options = ["--url", tenant.url, "--api-key", tenant.key]
    for command in (["sessions", "show", session_id], ["sessions", "list"], ["approvals", "list"]):
        result = CliRunner().invoke(app, [*command, *options], env={"COLUMNS": "400"})
        assert result.exit_code == 0, result.output
        texts.append(result.output)
    shown = "\n".join([*texts, json.dumps(events)])
    assert_no_secret(shown)
    return shown


def held_action(api: httpx.Client, session_id: str) -> str:
    """A call held for a before-execution approval; its approval's id."""
    body = {"connector": "http", "apiName": "POST /v1/refunds", "operationType": "CREATE", "requiresApproval": True}
    logged = api.post(f"/sessions/{session_id}/actions", json=body)
    assert logged.status_code == 201, logged.text
    approval_id: str = logged.json()["approval"]["approvalId"]
    return approval_id


def new_session(api: httpx.Client, intent: str = "Refund order 7") -> str:
    made = api.post("/sessions", json={"agentId": "billing-agent", "intent": intent})
    assert made.status_code == 201, made.text
    session_id: str = made.json()["id"]
    return session_id


def test_a_planted_intent_is_read_back_through_no_path(
    server: RunningServer, tenant: Tenant, receiver: WebhookReceiver
) -> None:
    api = operator(tenant)
    session_id = new_session(api, PLANTED)
    held_action(api, session_id)  # its approval.requested event carries the session's intent
    events = delivered(receiver, "approval.requested")
    assert [e["data"]["sessionIntent"] for e in events] == [KEPT]
    assert api.get(f"/sessions/{session_id}").json()["intent"] == KEPT
    assert KEPT in read_back_without_secrets(server, tenant, session_id, events)


@pytest.fixture
def held(tenant: Tenant) -> tuple[str, str]:
    """A session whose one call waits for a before-execution approval: their ids."""
    session_id = new_session(operator(tenant))
    return session_id, held_action(operator(tenant), session_id)


def test_a_planted_rejection_reason_is_read_back_through_no_path(
    server: RunningServer, tenant: Tenant, receiver: WebhookReceiver, held: tuple[str, str]
) -> None:
    (session_id, approval_id), api = held, operator(tenant)
    decision = {"reviewer": "lead@example.com", "reason": PLANTED}
    assert api.post(f"/approvals/{approval_id}/reject", json=decision).status_code == 200
    events = delivered(receiver, "approval.decided")
    assert api.get(f"/approvals/{approval_id}").json()["reason"] == KEPT
    (action,) = api.get(f"/sessions/{session_id}").json()["actions"]
    assert action["error"] == f"approval rejected: {KEPT}"  # what the agent is told, too
    assert KEPT in read_back_without_secrets(server, tenant, session_id, events)


def test_a_planted_withdrawal_reason_is_read_back_through_no_path(
    server: RunningServer, tenant: Tenant, receiver: WebhookReceiver, held: tuple[str, str]
) -> None:
    (session_id, approval_id), api = held, operator(tenant)
    assert api.post(f"/approvals/{approval_id}/withdraw", json={"reason": PLANTED}).status_code == 200
    events = delivered(receiver, "approval.decided")
    assert api.get(f"/approvals/{approval_id}").json()["reason"].startswith(f"withdrawn: {KEPT} (")
    read_back_without_secrets(server, tenant, session_id, events)


def test_a_planted_rollback_reason_is_read_back_through_no_path_even_cut_short(
    server: RunningServer, tenant: Tenant, receiver: WebhookReceiver
) -> None:
    api = operator(tenant)
    session_id = new_session(api)
    body = {"connector": "http", "apiName": "POST /v1/notes", "operationType": "CREATE"}
    action_id = api.post(f"/sessions/{session_id}/actions", json=body).json()["action"]["actionId"]
    done = {"status": "SUCCESS", "response": {}, "undo": {"type": "none"}}
    assert api.patch(f"/sessions/{session_id}/actions/{action_id}", json=done).status_code == 200
    # The trigger keeps 200 characters: the token straddles the cut.
    padding = "x" * (200 - len("requested: ") - 20)
    reason = f"{padding} {GITHUB_TOKEN} and card {CARD}"
    assert api.post(f"/sessions/{session_id}/rollback", json={"reason": reason}).status_code == 202
    events = delivered(receiver, "rollback.completed")
    trigger = api.get(f"/sessions/{session_id}/rollback").json()["trigger"]
    assert trigger == f"requested: {padding} [REDACTED] and card"
    read_back_without_secrets(server, tenant, session_id, events)

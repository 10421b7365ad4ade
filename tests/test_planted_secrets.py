"""Secrets planted in free text that people and agents write (a session's intent, a reviewer's reason, a
withdrawal, a rollback's reason) are stored redacted, embedded and through the server, on both databases, and
read back through no path: the SDK, the REST API, the dashboard, webhook bodies, the command line. The words
around them are kept."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from dashboard import account, visitor
from peers import FakeModel, WebhookReceiver, eventually, operator
from serving import RunningServer, Tenant
from typer.testing import CliRunner

from agentrein import AgentRein
from agentrein_cli.main import app
from agentrein_core.store.schema import metadata
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


def new_session(api: httpx.Client, intent: str = "Refund order 7", agent_id: str = "billing-agent") -> str:
    made = api.post("/sessions", json={"agentId": agent_id, "intent": intent})
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


# every kind of secret in every field ----------------------------------------------------------------------
PEM_BODY = (
    "MIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf9Cnzj4p4WGeKLs1Pt8Qu",
    "KUpRKfFLfRYC9AIKjbJTWit+CqvjWYzvQwECAwEAAQ==",
)
#: Each kind of secret: planted as this text, it must be found nowhere as any of these strings.
KINDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "card": (f"pay with {CARD} today", (CARD, CARD.replace(" ", ""))),
    "github": (f"use {GITHUB_TOKEN}", (GITHUB_TOKEN,)),
    "github-pat": ("github_pat_11ABCDEFG0aB1cD2eF3gH4iJ5kL6mN7oP8qR9sT", ("github_pat_11ABCDEFG0aB1cD2eF3gH4",)),
    "stripe-secret": (f"key {STRIPE_KEY}", (STRIPE_KEY,)),
    "stripe-restricted": ("key rk_live_51HqLyjWDarjtT1zdp7dc", ("rk_live_51HqLyjWDarjtT1zdp7dc",)),
    "stripe-webhook": ("whsec_aB1cD2eF3gH4iJ5kL6mN7oP8qR", ("whsec_aB1cD2eF3gH4iJ5kL6mN7oP8qR",)),
    "stripe-client-secret": ("pi_3MtwBwLkdIwHu7ix28a3tqPa_secret_YrKJUKribcBjcG8HVhfZ", ("YrKJUKribcBjcG8HVhfZ",)),
    "slack": ("xoxb-1234567890-0987654321-aB1cD2eF3gH4", ("aB1cD2eF3gH4",)),
    "aws-key-id": ("AKIAIOSFODNN7EXAMPLE", ("AKIAIOSFODNN7EXAMPLE",)),
    "google": ("AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", ("AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",)),
    "gitlab": ("glpat-aB1cD2eF3gH4iJ5kL6mN", ("glpat-aB1cD2eF3gH4iJ5kL6mN",)),
    "openai": ("sk-proj-aB1cD2eF3gH4iJ5kL6mN7oP8qR9sT0uV", ("aB1cD2eF3gH4iJ5kL6mN7oP8qR9sT0uV",)),
    "npm": ("npm_aB1cD2eF3gH4iJ5kL6mN7oP8qR9sT0uV1wX2", ("npm_aB1cD2eF3gH4iJ5kL6mN7oP8qR9sT0uV1wX2",)),
    "pypi": ("pypi-AgEIcHlwaS5vcmcCJGFiY2RlZjEyLTM0NTYtNzg5MC1hYmNkLWVm", ("AgEIcHlwaS5vcmcCJGFiY2RlZjEy",)),
    "jwt": ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlc2ln", ("eyJzdWIiOiIxMjM0In0",)),
    "bearer": ("Authorization: Bearer k3j9x2m4n8p1", ("k3j9x2m4n8p1",)),
    "password-pair": ("password=hunter2-pw", ("hunter2-pw",)),
    "slack-webhook": (
        "https://hooks.test/services/T0001/B0002/aB1cD2eF3gH4iJ5kL6mN7oP8",
        ("aB1cD2eF3gH4iJ5kL6mN7oP8",),
    ),
    "telegram": ("https://tg.test/bot123456:ABC-DEF1234ghIkl-zyx57W2v1u123ew11/send", ("ABC-DEF1234ghIkl",)),
    "discord": ("https://discord.test/api/webhooks/123456789/k3j9x2m4n8q7", ("k3j9x2m4n8q7",)),
    "random-path": ("https://api.test/v1/feeds/k3j9x2m4n8p1q7r5s6t0/items", ("k3j9x2m4n8p1q7r5s6t0",)),
    "query-token": ("https://api.test/v1/x?access_token=tok-in-query-7", ("tok-in-query-7",)),
    # the shapes issue 23 found missed
    "sendgrid": ("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", ("pQ8rS9tU0vW1xY2zA3bC4d",)),
    "pem": (f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY[0]}\n{PEM_BODY[1]}\n-----END RSA PRIVATE KEY-----", PEM_BODY),
    "url-password": ("https://bob:hunter2-url@api.test/v1/x", ("hunter2-url",)),
    "dsn": ("postgresql://app:s3cr3t-dsn@db.internal:5432/app", ("s3cr3t-dsn",)),
    "secretish-key": ("db_pw: letmein-db-pw", ("letmein-db-pw",)),
    "aws-secret": ("aws wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", ("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",)),
}


def undo_url(text: str) -> str:
    """The planted text as an undo's URL would hold it: the URL itself, a pair in its query, or a token as a
    query's value (no URL holds a PEM block)."""
    if text.startswith(("http://", "https://")):
        return text
    if "BEGIN" in text:
        return "https://api.test/v1/undo"
    if "=" in text or ": " in text:
        return "https://api.test/v1/undo?" + text.replace(": ", "=").replace(" ", "%20")
    return "https://api.test/v1/undo?memo=" + (CARD.replace(" ", "") if CARD in text else max(text.split(), key=len))


def plant(api: httpx.Client, i: int, text: str) -> None:
    """``text`` in every field one session, its calls, a policy and a review take: the agent's id, the intent,
    a policy's name and api name (which the call matches: its review is approved with the text as reason),
    a call's api name, payload, response and undo (URL, JSON body, text), a failed call's error, a journaled
    call's payload and error, and a journaled call's idempotency key (refused)."""
    api_name = f"POST /v1/k{i}/{text}"
    policy = {"name": f"review {i} {text}", "effect": "REQUIRE_APPROVAL", "apiName": api_name}
    assert api.post("/policies", json=policy).status_code == 201
    session_id = new_session(api, f"refund {text}", agent_id=f"agent {text}")
    body = {"connector": "http", "apiName": api_name, "operationType": "CREATE", "payload": {"note": text}}
    action = api.post(f"/sessions/{session_id}/actions", json=body).json()["action"]
    undo = {"type": "http-request", "method": "POST", "url": undo_url(text), "json": {"note": text, "lines": [text]}}
    done = {"status": "SUCCESS", "response": {"note": text, "config": {"dsn": text}}, "undo": undo}
    confirmed = api.patch(f"/sessions/{session_id}/actions/{action['actionId']}", json=done)
    assert confirmed.status_code == 200, confirmed.text
    assert confirmed.json()["policyName"] is not None  # the redacted glob matches the redacted api name
    (review,) = [a for a in api.get("/approvals", params={"status": "PENDING"}).json() if a["sessionId"] == session_id]
    decision = {"reviewer": "lead@example.com", "reason": f"fine, {text}"}
    assert api.post(f"/approvals/{review['approvalId']}/approve", json=decision).status_code == 200
    body = {"connector": "http", "apiName": "POST /v1/charges", "operationType": "CREATE", "payload": {"n": text}}
    failing = api.post(f"/sessions/{session_id}/actions", json=body).json()["action"]["actionId"]
    failed = {"status": "FAILED", "error": f"failed: {text}"}
    assert api.patch(f"/sessions/{session_id}/actions/{failing}", json=failed).status_code == 200
    journaled = {
        "idempotencyKey": f"agentrein-journal-{i:032x}",
        "connector": "http",
        "apiName": "POST /v1/journaled",
        "operationType": "CREATE",
        "status": "FAILED",
        "payload": {"note": text},
        "error": f"offline: {text}",
    }
    assert api.post(f"/sessions/{session_id}/journal", json=journaled).status_code == 201
    keyed = api.post(f"/sessions/{session_id}/journal", json=journaled | {"idempotencyKey": text[:100]})
    assert keyed.status_code == 400 and "secret" in keyed.json()["detail"], keyed.text


def stored_text(server: RunningServer) -> str:
    """What the server's database holds: the SQLite file and its write-ahead log as they are on disk, or every
    row of every table of the PostgreSQL database."""
    store = server.engine.store
    if store.dialect == "sqlite":
        path = Path(str(store.engine.url.database))
        return "".join(p.read_bytes().decode("latin-1") for p in (path, Path(f"{path}-wal")) if p.exists())
    with store.engine.connect() as conn:
        return "\n".join(
            str(row) for table in metadata.sorted_tables for row in conn.execute(sa.select(table)).fetchall()
        )


def test_every_kind_of_secret_planted_in_every_field_is_found_in_no_database_log_webhook_or_verifier_request(
    server: RunningServer, tenant: Tenant, receiver: WebhookReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    api = operator(tenant)
    echoed = {"outcome": "VERIFIED", "rationale": f"Serves it; the agent used {GITHUB_TOKEN}."}  # a model's words
    with FakeModel(answer=lambda _: echoed).running() as model:
        settings = {"verifierUrl": model.url, "verifierModel": "m", "onDrift": "none"}
        assert api.patch("/settings", json=settings).status_code == 200
        for i, (text, _) in enumerate(KINDS.values()):
            plant(api, i, text)
        eventually(lambda: model.requests, lambda asked: len(asked) >= len(KINDS))
        bodies = delivered(receiver, "approval.decided")
        eventually(lambda: receiver.accepted(), lambda got: len(got) >= 2 * len(KINDS))
    places = {
        "database": stored_text(server),
        "logs": caplog.text,
        "webhooks": "\n".join(r.body.decode() for r in receiver.accepted()),
        "verifier": json.dumps([body for _, body in model.requests], ensure_ascii=False),
    }
    leaks = [
        (place, kind, found[max(0, found.index(s) - 60) : found.index(s) + 60])
        for kind, (_, secrets) in KINDS.items()
        for place, found in places.items()
        for s in secrets
        if s in found
    ]
    assert leaks == [], "\n".join(map(str, leaks))
    assert bodies and "[REDACTED]" in places["webhooks"] and "[REDACTED]" in places["verifier"]

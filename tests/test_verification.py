"""Intent verification through a real server and a loopback OpenAI-compatible model: what the verifier is
asked (model, schema, redaction), what is stored and shown, what drift leads to, and that a verifier that
fails never reaches the agent."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from attrs import evolve
from peers import FakeModel, eventually, operator
from serving import RunningServer, Tenant
from typer.testing import CliRunner

from agentrein import AgentRein, DisplayStatus, SessionInfo
from agentrein_cli.main import app
from agentrein_core import intent
from agentrein_core.commands import Confirmed, WriteAhead
from agentrein_core.engine import Engine
from agentrein_core.openai_verifier import ANSWER_SCHEMA
from agentrein_core.statuses import ActionStatus, ApprovalPurpose, Plan, VerificationOutcome
from agentrein_core.store import Store
from agentrein_core.targets import ALLOW_PRIVATE_ENV
from agentrein_testing import FakeService

MODEL = "judge-1"


@pytest.fixture
def model() -> Iterator[FakeModel]:
    with FakeModel().running() as running:
        yield running


@pytest.fixture
def tenant(server: RunningServer, model: FakeModel) -> Tenant:
    """An organisation whose own verifier is the loopback model."""
    tenant = server.tenant()
    settings = {"verifierUrl": model.url, "verifierModel": MODEL, "verifierApiKey": "sk-test-verifier"}
    assert operator(tenant).patch("/settings", json=settings).status_code == 200
    return tenant


def checked(ar: AgentRein, session: SessionInfo) -> SessionInfo:
    """The session once its actions (and, if completed, the session itself) have been checked."""

    def all_checked(s: SessionInfo) -> bool:
        actions_done = all(
            a.verification and a.verification.outcome for a in s.actions if a.status is ActionStatus.SUCCESS
        )
        return actions_done and (s.completed_at is None or bool(s.verification and s.verification.outcome))

    result: SessionInfo = eventually(lambda: ar.get_session(session), all_checked)
    return result


def run_agent(
    tenant: Tenant, service: FakeService, calls: int = 2, *, intent: str = "Create two orders"
) -> tuple[AgentRein, SessionInfo]:
    ar = tenant.client()
    session = ar.new_session(agent_id="order-agent", intent=intent)
    api = ar.wrap(httpx.Client(base_url=service.base_url), session, connector="http")
    for n in range(calls):
        api.post("/v1/orders", json={"sku": f"A{n}", "api_key": "sk_live_hidden"})
    return ar, session


def test_each_action_and_the_completed_session_are_verified_and_shown(
    tenant: Tenant, model: FakeModel, service: FakeService
) -> None:
    ar, session = run_agent(tenant, service)
    ar.complete_session(session)
    shown = checked(ar, session)
    for action in shown.actions:
        assert action.verification is not None
        assert action.verification.outcome is VerificationOutcome.VERIFIED
        assert action.verification.rationale == "The calls serve it."
        assert action.verification.verifier == f"openai-compatible:{MODEL}"
    assert shown.verification is not None and shown.verification.outcome is VerificationOutcome.VERIFIED
    wire = operator(tenant).get(f"/sessions/{session.id}").json()
    assert wire["verification"]["outcome"] == "VERIFIED"
    assert {a["verification"]["outcome"] for a in wire["actions"]} == {"VERIFIED"}
    # the session's check saw both actions; each action's check saw only its own
    asked = model.user_messages()
    assert sorted(len(q["calls"]) for q in asked) == [1, 1, 2]
    assert {q["declaredIntent"] for q in asked} == {"Create two orders"}
    ar.close()


def test_the_verifier_is_asked_for_a_schema_answer_with_the_model_key_and_redacted_payloads(
    tenant: Tenant, model: FakeModel
) -> None:
    api = operator(tenant)
    session_id = api.post("/sessions", json={"agentId": "a", "intent": "Send the welcome email"}).json()["id"]
    body = {
        "connector": "http",
        "apiName": "POST /v1/emails",
        "operationType": "CREATE",
        "payload": {"to": "new@example.com", "password": "hunter2", "nested": {"authorization": "Bearer abc"}},
    }
    action_id = api.post(f"/sessions/{session_id}/actions", json=body).json()["action"]["actionId"]
    api.patch(f"/sessions/{session_id}/actions/{action_id}", json={"status": "SUCCESS", "response": {"token": "t0k"}})
    eventually(lambda: model.requests, bool)
    headers, request = model.requests[0]
    assert headers["authorization"] == "Bearer sk-test-verifier"
    assert request["model"] == MODEL
    assert request["response_format"]["type"] == "json_schema"
    assert request["response_format"]["json_schema"]["schema"] == ANSWER_SCHEMA
    sent = str(request)
    assert "hunter2" not in sent and "Bearer abc" not in sent and "t0k" not in sent
    (call,) = model.user_messages()[0]["calls"]
    assert call["payload"]["to"] == "new@example.com" and call["payload"]["password"] == "[REDACTED]"


def test_drift_opens_a_review_of_the_action_by_default_and_rejecting_it_undoes_the_action(
    tenant: Tenant, model: FakeModel, service: FakeService
) -> None:
    model.answer = lambda _: {"outcome": "DRIFT_DETECTED", "rationale": "It ordered for another customer."}
    ar, session = run_agent(tenant, service, calls=1, intent="Refund order 7")
    shown = checked(ar, session)
    (action,) = shown.actions
    assert action.verification is not None and action.verification.outcome is VerificationOutcome.DRIFT_DETECTED
    review = eventually(lambda: ar.list_approvals(status="PENDING"), bool)
    assert [(r.action_id, r.purpose) for r in review] == [(action.action_id, ApprovalPurpose.AFTER_EXECUTION)]
    ar.reject(review[0].approval_id, reviewer="lead", reason="drifted")
    undone = eventually(lambda: ar.get_session(session), lambda s: s.actions[0].status is ActionStatus.ROLLED_BACK)
    assert undone.actions[0].status is ActionStatus.ROLLED_BACK
    assert service.resources["orders"] == {}
    ar.close()


def test_drift_rolls_the_session_back_when_the_organisation_chose_rollback(
    tenant: Tenant, model: FakeModel, service: FakeService
) -> None:
    operator(tenant).patch("/settings", json={"onDrift": "rollback"})
    model.answer = lambda q: (
        {"outcome": "DRIFT_DETECTED", "rationale": "Two orders, one was asked for."}
        if len(json.loads(q["messages"][-1]["content"])["calls"]) > 1
        else {"outcome": "VERIFIED", "rationale": "fine"}
    )
    ar, session = run_agent(tenant, service, calls=2, intent="Create one order")
    ar.complete_session(session)
    reverted = eventually(lambda: ar.get_session(session), lambda s: s.display_status is DisplayStatus.REVERTED)
    assert reverted.display_status is DisplayStatus.REVERTED
    assert reverted.verification is not None and reverted.verification.outcome is VerificationOutcome.DRIFT_DETECTED
    assert service.resources["orders"] == {}
    ar.close()


def test_drift_is_only_recorded_when_the_organisation_chose_none(
    tenant: Tenant, model: FakeModel, service: FakeService
) -> None:
    operator(tenant).patch("/settings", json={"onDrift": "none"})
    model.answer = lambda _: {"outcome": "DRIFT_DETECTED", "rationale": "odd"}
    ar, session = run_agent(tenant, service, calls=1)
    shown = checked(ar, session)
    assert shown.actions[0].verification.outcome is VerificationOutcome.DRIFT_DETECTED  # type: ignore[union-attr]
    assert ar.list_approvals() == [] and shown.actions[0].status is ActionStatus.SUCCESS
    ar.close()


def test_without_a_verifier_checks_are_unverified_saying_so(server: RunningServer, service: FakeService) -> None:
    ar, session = run_agent(server.tenant(), service, calls=1)
    shown = checked(ar, session)
    check = shown.actions[0].verification
    assert check is not None and check.outcome is VerificationOutcome.UNVERIFIED
    assert check.rationale == "no verifier configured" and check.due_at is None
    ar.close()


@pytest.mark.parametrize(
    ("answer", "reason"),
    [("garbage", "not a verdict"), ("500", "answered 500"), ("hang", "did not answer within 0.3 s")],
)
def test_a_failing_verifier_gives_unverified_with_the_reason_and_is_asked_again(
    tenant: Tenant,
    model: FakeModel,
    service: FakeService,
    server: RunningServer,
    monkeypatch: pytest.MonkeyPatch,
    answer: str,
    reason: str,
) -> None:
    checks = server.services.workers.checks
    assert checks is not None
    monkeypatch.setattr(checks, "environment", evolve(checks.environment, timeout=0.3))
    monkeypatch.setattr(intent, "RETRY_AFTER", (timedelta(seconds=0.5),) * 4)
    failing = {"on": True}
    model.answer = lambda _: answer if failing["on"] else {"outcome": "VERIFIED", "rationale": "recovered"}
    ar, session = run_agent(tenant, service, calls=1)
    first = eventually(lambda: ar.get_session(session).actions[0].verification, lambda v: v is not None and v.outcome)
    assert first.outcome is VerificationOutcome.UNVERIFIED and reason in first.rationale
    assert first.due_at is not None  # asked again later
    failing["on"] = False
    model.release.set()
    later = eventually(
        lambda: ar.get_session(session).actions[0].verification,
        lambda v: v.outcome is VerificationOutcome.VERIFIED,
    )
    assert later.outcome is VerificationOutcome.VERIFIED and later.attempts >= 2
    ar.close()


def test_the_agent_never_waits_for_the_verifier(tenant: Tenant, model: FakeModel, service: FakeService) -> None:
    model.answer = lambda _: "hang"
    ar = tenant.client()
    session = ar.new_session(agent_id="a", intent="Create orders")
    api = ar.wrap(httpx.Client(base_url=service.base_url), session, connector="http")
    api.post("/v1/orders", json={})
    eventually(lambda: model.requests, bool)  # the verifier now hangs on the first call's check
    second = threading.Thread(target=lambda: api.post("/v1/orders", json={}))
    second.start()
    second.join(timeout=10)
    completed = ar.complete_session(session)
    assert not second.is_alive() and completed.status == "COMPLETED"
    model.release.set()
    ar.close()


def test_embedded_mode_verifies_in_a_background_thread(
    tmp_path: Any, model: FakeModel, service: FakeService, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(intent.URL_ENV, model.url)
    monkeypatch.setenv(intent.MODEL_ENV, MODEL)
    ar = AgentRein(f"sqlite:///{tmp_path / 'embedded.db'}")
    session = ar.new_session(agent_id="a", intent="Create an order")
    api = ar.wrap(httpx.Client(base_url=service.base_url), session, connector="http")
    api.post("/v1/orders", json={})
    shown = checked(ar, session)
    assert shown.actions[0].verification.outcome is VerificationOutcome.VERIFIED  # type: ignore[union-attr]
    assert model.requests[0][1]["model"] == MODEL
    ar.close()


def test_sessions_show_prints_the_verification(tenant: Tenant, service: FakeService) -> None:
    ar, session = run_agent(tenant, service, calls=1)
    ar.complete_session(session)
    checked(ar, session)
    shown = CliRunner().invoke(
        app, ["sessions", "show", session.id, "--url", tenant.url, "--api-key", tenant.key], env={"COLUMNS": "200"}
    )
    assert shown.exit_code == 0, shown.output
    assert "VERIFIED" in shown.output and "The calls serve it." in shown.output
    ar.close()


def test_an_organisation_with_its_own_url_never_gets_the_servers_verifier_key(
    server: RunningServer, model: FakeModel, service: FakeService, monkeypatch: pytest.MonkeyPatch
) -> None:
    checks = server.services.workers.checks
    assert checks is not None
    server_own = intent.VerifierSettings("http://127.0.0.1:9/v1", "server-model", "sk-SERVER-SECRET")
    monkeypatch.setattr(checks, "environment", server_own)
    tenant = server.tenant()
    operator(tenant).patch("/settings", json={"verifierUrl": model.url})  # no key, no model of its own
    ar, session = run_agent(tenant, service, calls=1)
    checked(ar, session)
    headers, body = model.requests[0]
    assert "authorization" not in headers and "sk-SERVER-SECRET" not in str(headers)
    assert "model" not in body
    ar.close()


def test_an_organisations_verifier_on_a_private_address_is_refused(
    tenant: Tenant, model: FakeModel, service: FakeService, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ALLOW_PRIVATE_ENV)
    ar, session = run_agent(tenant, service, calls=1)
    check = checked(ar, session).actions[0].verification
    assert check is not None and check.outcome is VerificationOutcome.UNVERIFIED
    assert "private or local address" in check.rationale and model.requests == []
    ar.close()


def test_an_organisations_verifier_on_a_private_address_is_refused_when_it_is_stored(
    tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refused at once, as webhook URLs are (no request is made: the addresses are literals)."""
    monkeypatch.delenv(ALLOW_PRIVATE_ENV)
    api = operator(tenant)
    before = api.get("/settings").json()["verifierUrl"]
    for url in ("http://127.0.0.1:9/v1", "http://169.254.169.254/latest", "http://[::1]:9/v1"):
        refused = api.patch("/settings", json={"verifierUrl": url})
        assert refused.status_code == 400 and "private or local address" in refused.json()["detail"], url
    assert api.get("/settings").json()["verifierUrl"] == before


def test_completing_twice_asks_for_one_session_check(tenant: Tenant, model: FakeModel, service: FakeService) -> None:
    ar, session = run_agent(tenant, service, calls=1)
    ar.complete_session(session)
    ar.complete_session(session)
    checked(ar, session)
    time.sleep(1.2)  # a second session check, had one been queued, would have been asked by now
    assert sorted(len(q["calls"]) for q in model.user_messages()) == [1, 1]
    ar.close()


def test_a_model_answer_no_database_keeps_is_stored_cleaned(
    tenant: Tenant, model: FakeModel, service: FakeService
) -> None:
    operator(tenant).patch("/settings", json={"onDrift": "rollback"})
    model.answer = lambda _: {"outcome": "DRIFT_DETECTED", "rationale": "bad\u0000ly drifted\u0007"}
    ar, session = run_agent(tenant, service, calls=1)
    check = checked(ar, session).actions[0].verification
    assert check is not None and check.rationale == "bad ly drifted"
    assert len(model.requests) == 1  # recorded at once, not taken again and again
    ar.close()


def test_drift_on_the_free_plan_says_no_review_was_possible(
    server: RunningServer, model: FakeModel, service: FakeService
) -> None:
    tenant = server.tenant(Plan.FREE)
    operator(tenant).patch("/settings", json={"verifierUrl": model.url, "verifierModel": MODEL})
    model.answer = lambda _: {"outcome": "DRIFT_DETECTED", "rationale": "off"}
    ar, session = run_agent(tenant, service, calls=1)
    checked(ar, session)
    (event,) = [e for e in server.engine.outbox.list_events(tenant.org_id) if e.type == "drift.detected"]
    assert event.data["consequence"] == "recorded only: the free plan has no approvals"
    assert ar.list_approvals() == []
    ar.close()


def _answered(verification: Any) -> bool:
    return verification is not None and verification.outcome is not None


def test_an_embedded_client_asks_the_checks_left_waiting_in_its_database(
    tmp_path: Any, model: FakeModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'embedded.db'}"
    store = Store(url)  # a process that recorded a call and ended before any check ran
    engine = Engine(store)
    org = engine.accounts.ensure_organisation()
    session = engine.recording.new_session(org.org_id, "a", "Create an order")
    logged = engine.recording.log_action(
        org.org_id,
        session.session_id,
        WriteAhead(connector="http", api_name="POST /v1/orders", operation_type="CREATE", payload={}),
    )
    engine.recording.confirm_action(org.org_id, logged.action.action_id, Confirmed(response={}))
    store.close()
    monkeypatch.setenv(intent.URL_ENV, model.url)
    monkeypatch.setenv(intent.MODEL_ENV, MODEL)
    ar = AgentRein(url)
    # The check is queued by the new process's supervisor (the call marked it wanted) and then asked.
    shown = eventually(lambda: ar.get_session(session.session_id), lambda s: bool(s.actions[0].verification))
    verification = eventually(lambda: ar.get_session(session.session_id).actions[0].verification, _answered)
    assert verification is not None and verification.outcome is VerificationOutcome.VERIFIED
    assert shown.actions[0].action_id == logged.action.action_id
    ar.close()


def test_settings_are_validated_and_the_verifier_key_never_returned(tenant: Tenant) -> None:
    api = operator(tenant)
    shown = api.get("/settings").json()
    assert shown["hasVerifierApiKey"] is True and "sk-test-verifier" not in str(shown)
    assert shown["onDrift"] == "review"
    for bad, field in (
        ({"onDrift": "panic"}, "onDrift"),
        ({"verifierUrl": "ftp://x"}, "verifierUrl"),
        ({"webhookHosts": ["a b"]}, "webhookHosts"),
    ):
        refused = api.patch("/settings", json=bad)
        assert refused.status_code == 400 and field in refused.json()["detail"], bad
    assert api.patch("/settings", json={"verifierApiKey": None}).json()["hasVerifierApiKey"] is False

"""A call held for approval: it says what it waits for, and its wait outlives a server that goes away (killed
or stopped, then started again on the same database and port)."""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from cryptography.fernet import Fernet
from dashboard import account, visitor
from peers import eventually
from serving import RunningServer, ServerProcess, Tenant

from agentrein import ActionStatus, AgentRein, ApprovalRejectedError, ApprovalTimeoutError
from agentrein_core.statuses import UserRole
from agentrein_testing import FakeService

HELD = "POST /v1/orders"


@pytest.fixture
def secret_key() -> str:
    return Fernet.generate_key().decode()


class HeldCall:
    """The agent's wrapped ``POST /v1/orders``, held for approval, made in a thread of its own."""

    def __init__(self, ar: AgentRein, service: FakeService, **options: Any) -> None:
        self.session = ar.new_session(agent_id="billing-agent", intent="create an order")
        client = ar.wrap(
            httpx.Client(base_url=service.base_url), self.session, connector="http", requires_approval=[HELD], **options
        )
        self.result: Any = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(client,))
        self._thread.start()

    def _run(self, client: httpx.Client) -> None:
        try:
            self.result = client.post("/v1/orders", json={}).json()
        except BaseException as exc:
            self.error = exc

    def ended(self) -> Any:
        self._thread.join(timeout=120)
        assert not self._thread.is_alive(), "the held call never ended"
        if self.error is not None:
            raise self.error
        return self.result


def pending_approval(api: httpx.Client) -> dict[str, Any]:
    """The one pending approval, once the held call has asked for it."""
    found: list[dict[str, Any]] = eventually(
        lambda: api.get("/approvals", params={"status": "PENDING"}).json(), bool, timeout=30
    )
    (approval,) = found
    return approval


def operator(server: ServerProcess, key: str) -> httpx.Client:
    return httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=60)


@pytest.fixture(params=["SIGKILL", "SIGTERM"])
def goes_away(request: pytest.FixtureRequest) -> Callable[[ServerProcess], None]:
    """How the server goes away: killed (a crash), or stopped (SIGTERM: it ends the requests under way)."""
    if request.param == "SIGKILL":
        return ServerProcess.kill

    def terminate(server: ServerProcess) -> None:
        server.process.terminate()
        server.process.wait(timeout=90)  # a long-poll under way ends first (30 s at most)

    return terminate


def test_a_call_held_for_approval_outlives_a_restart_of_the_server_and_runs_once_approved(
    own_database_url: str, secret_key: str, service: FakeService, goes_away: Callable[[ServerProcess], None]
) -> None:
    server = ServerProcess(own_database_url, secret_key)
    (key,) = server.printed_keys
    ar = AgentRein(base_url=server.url, api_key=key)
    held = HeldCall(ar, service)
    approval = pending_approval(operator(server, key))
    goes_away(server)
    restarted = ServerProcess(own_database_url, secret_key, port=server.port)
    try:
        api = operator(restarted, key)
        assert api.post(f"/approvals/{approval['approvalId']}/approve", json={}).status_code == 200
        order = held.ended()
        (action,) = eventually(lambda: ar.get_session(held.session).actions, lambda a: a[0].status == "SUCCESS")
    finally:
        ar.close()
        restarted.stop()
    assert action.status is ActionStatus.SUCCESS
    assert action.response is not None and action.response["body"]["id"] == order["id"]
    assert [call.path for call in service.calls("POST")] == ["/v1/orders"]


def test_a_call_held_for_approval_times_out_when_the_server_stays_away_past_the_request_s_time(
    own_database_url: str, secret_key: str, service: FakeService
) -> None:
    server = ServerProcess(own_database_url, secret_key)
    (key,) = server.printed_keys
    ar = AgentRein(base_url=server.url, api_key=key)
    held = HeldCall(ar, service, timeout_ms=10_000)  # long enough that it cannot expire before the kill
    pending_approval(operator(server, key))
    server.kill()
    with pytest.raises(ApprovalTimeoutError) as raised:
        held.ended()
    ar.close()
    assert "could not be reached until the request's time was up" in str(raised.value.__notes__)
    assert service.calls("POST") == []


def test_a_call_held_for_approval_says_what_it_waits_for_and_how_to_decide_it_through_a_server(
    server: RunningServer, service: FakeService, caplog: pytest.LogCaptureFixture
) -> None:
    ar = server.tenant().client()
    with caplog.at_level(logging.WARNING, logger="agentrein"):
        held = HeldCall(ar, service, timeout_ms=120_000)
        (approval,) = eventually(lambda: ar.list_approvals(status="PENDING"), bool)
        waits = eventually(lambda: _said(caplog, approval.approval_id), bool)
        ar.approve(approval.approval_id)
        held.ended()
    ar.close()
    (said,) = waits
    assert f"AgentRein holds {HELD} for approval {approval.approval_id} (120 s left to decide it)" in said
    assert f"{server.url}/dashboard/approvals#approval-{approval.approval_id}" in said
    assert f"AgentRein approval {approval.approval_id} is APPROVED: the held {HELD} runs now" in _said(
        caplog, "the held"
    )


def test_a_call_held_for_approval_says_what_it_waits_for_and_the_command_that_decides_it_embedded(
    embedded: AgentRein, service: FakeService, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="agentrein"):
        held = HeldCall(embedded, service, timeout_ms=60_000)
        (approval,) = eventually(lambda: embedded.list_approvals(status="PENDING"), bool)
        waits = eventually(lambda: _said(caplog, approval.approval_id), bool)
        embedded.reject(approval.approval_id, reviewer="lead", reason="not today")
        with pytest.raises(ApprovalRejectedError, match="not today"):
            held.ended()
    (said,) = waits
    assert f"AgentRein holds {HELD} for approval {approval.approval_id} (60 s left to decide it)" in said
    assert f"agentrein approvals approve {approval.approval_id} --database-url " in said
    assert ":agentrein@" not in said  # a database URL is shown without its password
    assert f"AgentRein approval {approval.approval_id} is REJECTED: the held {HELD} does not run" in _said(
        caplog, "the held"
    )


def _said(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    """The agentrein WARNINGs so far that hold ``text``."""
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "agentrein" and r.levelno == logging.WARNING and text in r.getMessage()
    ]


# the agent's presence, as the reviewer sees it --------------------------------------------------------------
WAITING = "The agent is waiting: nothing goes on until you decide"


def test_a_card_says_the_agent_is_waiting_while_its_long_poll_is_open_and_that_its_call_ran_once_approved(
    server: RunningServer, service: FakeService
) -> None:
    tenant = server.tenant()
    ar = tenant.client()
    held = HeldCall(ar, service)
    (approval,) = eventually(lambda: ar.list_approvals(status="PENDING"), bool)
    now = datetime.now(UTC)
    noted = eventually(lambda: _waited_until(server, tenant, approval.approval_id), lambda t: t is not None and t > now)
    assert noted is not None and noted > now  # a long-poll of the agent's is open
    assert ar.get_approval(approval.approval_id).agent_stopped_waiting_at is None
    with visitor(server, account(server, tenant, UserRole.REVIEWER)) as v:
        assert WAITING in _card(v, approval.approval_id)
        ar.approve(approval.approval_id)
        held.ended()
        ran = eventually(lambda: _card(v, approval.approval_id), lambda shown: "the agent&#39;s call ran" in shown)
    ar.close()
    assert "Approved: the agent&#39;s call ran." in ran
    ended = _waited_until(server, tenant, approval.approval_id)
    assert ended is not None and ended <= datetime.now(UTC)  # its long-poll ended as the decision came


def test_a_card_says_the_agent_stopped_waiting_and_once_approved_that_its_call_has_not_run(
    server: RunningServer,
) -> None:
    tenant = server.tenant()
    api = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {tenant.key}"}, timeout=30)
    session_id = api.post("/sessions", json={"agentId": "billing-agent", "intent": "refund"}).json()["id"]
    body = {"connector": "http", "apiName": "POST /v1/refunds", "operationType": "CREATE", "payload": {}}
    logged = api.post(f"/sessions/{session_id}/actions", json={**body, "requiresApproval": True}).json()
    approval_id = logged["approval"]["approvalId"]
    left = datetime.now(UTC) - timedelta(minutes=3, seconds=10)
    with server.engine.store.transaction() as tx:
        tx.approvals.note_waiter(approval_id, left)  # its agent's last long-poll ended then (the agent went away)
    shown = api.get(f"/approvals/{approval_id}").json()
    assert datetime.fromisoformat(shown["agentStoppedWaitingAt"]) == left
    with visitor(server, account(server, tenant, UserRole.REVIEWER)) as v:
        pending = _card(v, approval_id)
        assert WAITING not in pending
        assert '<p class="gone">The agent stopped waiting 3 minutes ago: approving lets nothing run now</p>' in pending
        assert api.post(f"/approvals/{approval_id}/approve", json={}).status_code == 200
        decided = _card(v, approval_id)
    api.close()
    assert f"Approved: the agent had stopped waiting ({left:%Y-%m-%d %H:%M} UTC), so its call has not run." in decided
    assert "resumed" not in decided


def _card(v: Any, approval_id: str) -> str:
    page = v.get("/dashboard/approvals").text
    found = re.search(rf'<article[^>]*id="approval-{approval_id}".*?</article>', page, re.S)
    assert found is not None, page
    return found.group(0)


def _waited_until(server: RunningServer, tenant: Tenant, approval_id: str) -> datetime | None:
    with server.engine.store.transaction(write=False) as tx:
        found = tx.approvals.get(tenant.org_id, approval_id)
    assert found is not None
    return found.waited_until

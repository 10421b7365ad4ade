"""Human approvals: before execution (requires_approval), after execution (policy), and what each decision does."""

from __future__ import annotations

import logging
import re
import signal
import threading
import uuid
from collections.abc import Callable
from typing import Any

import attrs
import httpx
import psycopg
import pytest

from agentrein import (
    ActionStatus,
    AgentRein,
    ApprovalInfo,
    ApprovalPurpose,
    ApprovalRejectedError,
    ApprovalStatus,
    ApprovalTimeoutError,
    DisplayStatus,
    InvalidTransitionError,
    SessionStatus,
    ValidationError,
)
from agentrein_testing import FakeService

APPROVAL_FIELDS = {
    "approval_id",
    "action_id",
    "api_name",
    "operation_type",
    "session_id",
    "agent_id",
    "payload_summary",
    "requested_at",
    "timeout_at",
    "time_remaining",
    "status",
    "resolved_at",
    "resolved_by",
    "reason",
    "action_status",
    "unconfirmed",
}


def start(ar: AgentRein, service: FakeService, **options: object) -> tuple[httpx.Client, str]:
    session = ar.new_session(agent_id="billing-agent", intent="Cancel stale orders")
    options.setdefault("poll_interval_ms", 20)
    client = ar.wrap(httpx.Client(base_url=service.base_url), session, connector="http", **options)  # type: ignore[arg-type]
    return client, session.id


def reviewer(ar: AgentRein, decide: Callable[[ApprovalInfo], object]) -> threading.Thread:
    """A reviewer in another thread who decides the first pending approval as soon as it appears."""

    def run() -> None:
        while not (pending := ar.list_approvals(status="PENDING")):
            threading.Event().wait(0.01)
        decide(pending[0])

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_an_approved_call_runs_and_succeeds(ar: AgentRein, service: FakeService) -> None:
    client, session_id = start(ar, service, requires_approval=["DELETE *"])
    order = client.post("/v1/orders", json={}).json()
    seen: list[ApprovalInfo] = []

    def approve(p: ApprovalInfo) -> None:
        seen.append(p)
        assert service.calls("DELETE") == []  # held: the call has not run
        assert ar.get_session(session_id).display_status is DisplayStatus.AWAITING_APPROVAL
        ar.approve(p.approval_id, reviewer="lead@example.com", reason="stale")

    thread = reviewer(ar, approve)
    response = client.delete(f"/v1/orders/{order['id']}")
    thread.join()
    assert response.json() == {"id": order["id"], "deleted": True}
    (pending,) = seen
    assert pending.purpose is ApprovalPurpose.BEFORE_EXECUTION
    assert pending.action_status is ActionStatus.PENDING_APPROVAL
    assert pending.api_name == f"DELETE /v1/orders/{order['id']}"
    session = ar.get_session(session_id)
    assert session.actions[1].status is ActionStatus.SUCCESS
    assert session.display_status is DisplayStatus.ACTIVE
    decided = ar.list_approvals()[0]
    assert (decided.status, decided.reason) == (ApprovalStatus.APPROVED, "stale")
    # through a server, the record also names the key the reviewer used
    assert decided.resolved_by is not None and decided.resolved_by.startswith("lead@example.com")


def test_a_rejection_fails_the_action_rolls_back_and_carries_the_reason(ar: AgentRein, service: FakeService) -> None:
    client, session_id = start(ar, service, requires_approval=["DELETE *"])
    order = client.post("/v1/orders", json={}).json()
    thread = reviewer(ar, lambda p: ar.reject(p.approval_id, reviewer="lead@example.com", reason="not today"))
    with pytest.raises(ApprovalRejectedError) as raised:
        client.delete(f"/v1/orders/{order['id']}")
    thread.join()
    assert raised.value.reason == "not today"
    session = ar.get_session(session_id)
    assert [a.status for a in session.actions] == [ActionStatus.ROLLED_BACK, ActionStatus.FAILED]
    assert session.status is SessionStatus.ROLLED_BACK
    assert [r.method for r in service.calls()] == ["POST", "DELETE"]  # only the undo of the create
    assert service.collection("orders") == {}


def test_an_undecided_approval_expires_and_raises_timeout(ar: AgentRein, service: FakeService) -> None:
    client, session_id = start(ar, service, requires_approval=["POST /v1/refunds"], timeout_ms=150)
    client.post("/v1/orders", json={})
    with pytest.raises(ApprovalTimeoutError):
        client.post("/v1/refunds", json={"amount": 10})
    session = ar.get_session(session_id)
    assert [a.status for a in session.actions] == [ActionStatus.ROLLED_BACK, ActionStatus.FAILED]
    assert session.approvals[0].status is ApprovalStatus.EXPIRED
    assert service.calls("POST", "/v1/refunds") == []


def test_an_expired_approval_is_not_swallowed_by_code_that_catches_network_errors(
    ar: AgentRein, service: FakeService
) -> None:
    """Agents catch ``OSError`` around their calls for network trouble; an expiry is not that."""
    client, _ = start(ar, service, requires_approval=["POST /v1/refunds"], timeout_ms=150)
    with pytest.raises(ApprovalTimeoutError):
        try:
            client.post("/v1/refunds", json={"amount": 10})
        except OSError:
            pytest.fail("the expiry was caught as a network error")


def test_an_agent_interrupted_while_it_waits_withdraws_its_request(ar: AgentRein, service: FakeService) -> None:
    """Ctrl-C while a call waits for approval: nobody is left to run it, so no reviewer may clear it later."""
    client, _ = start(ar, service, requires_approval=["POST /v1/refunds"])

    done = threading.Event()

    def press_until_withdrawn(main: int) -> None:
        """Ctrl-C, and again every 5 s while the request is still pending, as a person would: CPython drops an
        interrupt that lands while a weakref callback runs ("Exception ignored in ..."; seen once in CI)."""
        while True:
            signal.pthread_kill(main, signal.SIGINT)
            if done.wait(5) or ar.list_approvals(ApprovalStatus.PENDING) == []:
                return

    class PressCtrlC(logging.Handler):
        """Once the SDK says it holds the call (before that, it does not know the request it would withdraw): a
        real SIGINT, which, unlike ``_thread.interrupt_main``, also breaks the wait of a read from a socket."""

        def emit(self, record: logging.LogRecord) -> None:
            if "for approval" in record.getMessage():
                main = threading.main_thread().ident
                assert main is not None
                threading.Timer(0.05, press_until_withdrawn, (main,)).start()

    # Ctrl-C raises KeyboardInterrupt even where this run was started with SIGINT ignored (in the background).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    press = PressCtrlC()
    logging.getLogger("agentrein").addHandler(press)
    try:
        with pytest.raises(KeyboardInterrupt):
            client.post("/v1/refunds", json={"amount": 10})
    finally:
        done.set()
        logging.getLogger("agentrein").removeHandler(press)
        signal.signal(signal.SIGINT, previous)
    (request,) = ar.list_approvals()
    assert request.status is ApprovalStatus.REJECTED and request.action_status is ActionStatus.FAILED
    assert "withdrawn: the agent stopped waiting (KeyboardInterrupt)" in (request.reason or "")
    with pytest.raises(InvalidTransitionError, match="already REJECTED"):
        ar.approve(request.approval_id, reviewer="late@example.com")
    assert service.calls("POST", "/v1/refunds") == []


def test_an_agent_interrupted_inside_a_postgresql_query_while_it_waits_withdraws_its_request(
    postgres_url: str, service: FakeService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C landing between a query's sending and its answer leaves the driver's connection mid-command: the
    interrupt must still reach the agent, and the withdrawal go through on another connection."""
    with AgentRein(postgres_url, organisation=f"test-{uuid.uuid4().hex[:8]}") as ar:
        client, _ = start(ar, service, requires_approval=["POST /v1/refunds"])
        execute = psycopg.Cursor.execute
        waiting = threading.Event()

        def interrupted(cursor: psycopg.Cursor[Any], query: Any, *args: Any, **kwargs: Any) -> Any:
            if waiting.is_set() and "FROM approvals" in str(query):
                waiting.clear()  # this one query: the next finds the connection as Ctrl-C left it
                cursor.connection.pgconn.send_query(b"SELECT pg_sleep(0.2)")
                raise KeyboardInterrupt
            return execute(cursor, query, *args, **kwargs)

        class Held(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                if "for approval" in record.getMessage():
                    waiting.set()

        monkeypatch.setattr(psycopg.Cursor, "execute", interrupted)
        held = Held()
        logging.getLogger("agentrein").addHandler(held)
        try:
            with pytest.raises(KeyboardInterrupt):
                client.post("/v1/refunds", json={"amount": 10})
        finally:
            logging.getLogger("agentrein").removeHandler(held)
        (request,) = ar.list_approvals()
        assert request.status is ApprovalStatus.REJECTED
        assert "withdrawn: the agent stopped waiting (KeyboardInterrupt)" in (request.reason or "")
        assert service.calls("POST", "/v1/refunds") == []


def test_approval_is_matched_by_glob_over_the_api_name(ar: AgentRein, service: FakeService) -> None:
    client, session_id = start(ar, service, requires_approval=["DELETE /v1/orders/*"])
    order = client.post("/v1/orders", json={}).json()
    thing = client.post("/v1/things", json={}).json()
    client.delete(f"/v1/things/{thing['id']}")  # not matched: runs at once
    assert ar.list_approvals() == []
    thread = reviewer(ar, lambda p: ar.approve(p.approval_id, reviewer="r"))
    client.delete(f"/v1/orders/{order['id']}")
    thread.join()
    assert len(ar.get_session(session_id).approvals) == 1


def test_list_approvals_returns_the_reference_fields(ar: AgentRein, service: FakeService) -> None:
    client, session_id = start(ar, service, requires_approval=["POST *"], timeout_ms=60_000)
    captured: list[ApprovalInfo] = []

    def capture(p: ApprovalInfo) -> None:
        captured.append(p)
        ar.approve(p.approval_id, reviewer="r")

    thread = reviewer(ar, capture)
    client.post("/v1/orders", json={"sku": "A1", "password": "pw"})
    thread.join()
    (info,) = captured
    assert {f.name for f in attrs.fields(ApprovalInfo)} >= APPROVAL_FIELDS
    assert info.session_id == session_id and info.agent_id == "billing-agent"
    assert 50 < info.time_remaining <= 61  # the wall clock may step a little between two reads
    assert "POST /v1/orders" in info.payload_summary and "A1" in info.payload_summary
    assert "pw" not in info.payload_summary
    assert info.unconfirmed is False


def test_an_after_execution_policy_approval_leaves_the_action_run(ar: AgentRein, service: FakeService) -> None:
    ar.add_policy(name="review refunds", effect="REQUIRE_APPROVAL", api_name="POST /v1/refunds")
    client, session_id = start(ar, service)
    client.post("/v1/refunds", json={"amount": 5})
    (pending,) = ar.list_approvals(status="PENDING")
    assert pending.purpose is ApprovalPurpose.AFTER_EXECUTION
    assert pending.action_status is ActionStatus.SUCCESS
    assert ar.get_session(session_id).display_status is DisplayStatus.AWAITING_APPROVAL
    ar.approve(pending.approval_id, reviewer="r")
    session = ar.get_session(session_id)
    assert session.actions[0].status is ActionStatus.SUCCESS
    assert session.display_status is DisplayStatus.ACTIVE


def test_rejecting_an_after_execution_approval_undoes_that_action_only(ar: AgentRein, service: FakeService) -> None:
    ar.add_policy(name="review refunds", effect="REQUIRE_APPROVAL", api_name="POST /v1/refunds")
    client, session_id = start(ar, service)
    order = client.post("/v1/orders", json={}).json()
    refund = client.post("/v1/refunds", json={"amount": 5}).json()
    client.post("/v1/notes", json={})
    (pending,) = ar.list_approvals(status="PENDING")
    ar.reject(pending.approval_id, reviewer="r", reason="too generous")
    session = ar.get_session(session_id)
    assert [a.status for a in session.actions] == [
        ActionStatus.SUCCESS,
        ActionStatus.ROLLED_BACK,
        ActionStatus.SUCCESS,
    ]
    assert session.status is SessionStatus.ACTIVE
    assert session.display_status is DisplayStatus.PARTIALLY_REVERTED
    assert [r.path for r in service.calls("DELETE")] == [f"/v1/refunds/{refund['id']}"]
    assert order["id"] in service.collection("orders")


def test_a_before_execution_policy_holds_a_call_the_agent_did_not_declare(ar: AgentRein, service: FakeService) -> None:
    ar.add_policy(name="approve refunds", effect="REQUIRE_APPROVAL", api_name="POST /v1/refunds", before_execution=True)
    client, session_id = start(ar, service)  # the agent's code declares no approvals

    def approve(p: ApprovalInfo) -> None:
        assert p.purpose is ApprovalPurpose.BEFORE_EXECUTION
        assert service.calls("POST") == []  # held: the call has not run
        ar.approve(p.approval_id, reviewer="lead@example.com")

    thread = reviewer(ar, approve)
    client.post("/v1/refunds", json={"amount": 5})
    thread.join()
    assert len(service.calls("POST")) == 1
    (action,) = ar.get_session(session_id).actions
    assert action.status is ActionStatus.SUCCESS and action.policy_name == "approve refunds"
    assert ar.list_approvals(status="PENDING") == []  # approved before it ran: no second review afterwards


def test_a_call_a_before_execution_policy_holds_never_runs_when_rejected(ar: AgentRein, service: FakeService) -> None:
    ar.add_policy(name="approve refunds", effect="REQUIRE_APPROVAL", api_name="POST /v1/refunds", before_execution=True)
    client, session_id = start(ar, service)
    client.post("/v1/orders", json={})
    thread = reviewer(ar, lambda p: ar.reject(p.approval_id, reviewer="lead", reason="not this month"))
    with pytest.raises(ApprovalRejectedError) as raised:
        client.post("/v1/refunds", json={"amount": 5})
    thread.join()
    assert raised.value.reason == "not this month"
    assert [r.path for r in service.calls("POST")] == ["/v1/orders"]
    session = ar.get_session(session_id)
    assert session.status is SessionStatus.ROLLED_BACK and session.display_status is DisplayStatus.REVERTED


def test_a_before_execution_policy_waits_for_its_own_timeout(ar: AgentRein, service: FakeService) -> None:
    ar.add_policy(
        name="approve refunds",
        effect="REQUIRE_APPROVAL",
        api_name="POST /v1/refunds",
        before_execution=True,
        approval_timeout_ms=50,
    )
    client, _ = start(ar, service, timeout_ms=3_600_000)  # the agent would wait an hour
    with pytest.raises(ApprovalTimeoutError):
        client.post("/v1/refunds", json={"amount": 5})
    assert service.calls("POST") == []
    (expired,) = ar.list_approvals(status="EXPIRED")
    assert (expired.timeout_at - expired.requested_at).total_seconds() == pytest.approx(0.05)


def test_holding_before_execution_is_stricter_than_reviewing_afterwards(ar: AgentRein, service: FakeService) -> None:
    ar.add_policy(name="review posts", effect="REQUIRE_APPROVAL", api_name="POST *")
    ar.add_policy(name="hold refunds", effect="REQUIRE_APPROVAL", api_name="POST /v1/refunds", before_execution=True)
    client, session_id = start(ar, service)
    thread = reviewer(ar, lambda p: ar.approve(p.approval_id, reviewer="lead"))
    client.post("/v1/refunds", json={"amount": 5})
    thread.join()
    (decided,) = ar.list_approvals(status="APPROVED")
    assert decided.purpose is ApprovalPurpose.BEFORE_EXECUTION
    assert ar.get_session(session_id).actions[0].policy_name == "hold refunds"
    assert ar.list_approvals(status="PENDING") == []


@pytest.mark.parametrize(
    ("kwargs", "field", "message"),
    [
        ({"effect": "BLOCK", "before_execution": True}, "before_execution", "only a REQUIRE_APPROVAL policy"),
        ({"effect": "REQUIRE_APPROVAL", "approval_timeout_ms": 1000}, "approval_timeout_ms", "before_execution"),
        (
            {"effect": "REQUIRE_APPROVAL", "before_execution": True, "approval_timeout_ms": 0},
            "approval_timeout_ms|approvalTimeoutMs",  # the engine's words, or the server's for its body
            "positive|>= 1",
        ),
    ],
)
def test_a_policy_that_cannot_hold_calls_is_refused(
    ar: AgentRein, kwargs: dict[str, object], field: str, message: str
) -> None:
    with pytest.raises(ValidationError, match=message) as raised:
        ar.add_policy(name="p", **kwargs)  # type: ignore[arg-type]
    assert re.fullmatch(field, str(raised.value.field))
    assert ar.list_policies() == []


def test_a_decided_approval_cannot_be_decided_again(ar: AgentRein, service: FakeService) -> None:
    ar.add_policy(name="review", effect="REQUIRE_APPROVAL", api_name="POST *")
    client, _ = start(ar, service)
    client.post("/v1/orders", json={})
    (pending,) = ar.list_approvals()
    ar.approve(pending.approval_id, reviewer="alice")
    with pytest.raises(InvalidTransitionError, match="already APPROVED by alice"):
        ar.reject(pending.approval_id, reviewer="bob")


def test_two_reviewers_deciding_at_once_see_exactly_one_win(ar: AgentRein, service: FakeService) -> None:
    ar.add_policy(name="review", effect="REQUIRE_APPROVAL", api_name="POST *")
    client, _ = start(ar, service)
    client.post("/v1/orders", json={})
    (pending,) = ar.list_approvals()
    outcomes: list[str] = []
    barrier = threading.Barrier(8)

    def decide(i: int) -> None:
        barrier.wait()
        try:
            if i % 2:
                ar.approve(pending.approval_id, reviewer=f"r{i}")
            else:
                ar.reject(pending.approval_id, reviewer=f"r{i}")
            outcomes.append("won")
        except InvalidTransitionError:
            outcomes.append("lost")

    threads = [threading.Thread(target=decide, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["lost"] * 7 + ["won"]


def test_a_reviewer_must_be_named(ar: AgentRein, service: FakeService) -> None:
    ar.add_policy(name="review", effect="REQUIRE_APPROVAL", api_name="POST *")
    client, _ = start(ar, service)
    client.post("/v1/orders", json={})
    (pending,) = ar.list_approvals()
    with pytest.raises(ValidationError, match="reviewer"):
        ar.approve(pending.approval_id, reviewer=" ")
    assert ar.list_approvals()[0].status is ApprovalStatus.PENDING


def test_an_unknown_status_filter_is_a_validation_error(ar: AgentRein) -> None:
    with pytest.raises(ValidationError, match="not an approval status"):
        ar.list_approvals(status="MAYBE")


def test_a_failure_after_approval_keeps_the_approved_action_cleared(ar: AgentRein, service: FakeService) -> None:
    # The rollback the failure causes is seen through within the wrap's 5 s: the approved action's outcome is
    # in (its failure record), so the chain does not wait for it as for a call still under way.
    client, session_id = start(ar, service, requires_approval=["POST /v1/payouts"], timeout_ms=5000)
    client.post("/v1/orders", json={})
    service.fail_next("POST", "/v1/payouts", status=500)
    thread = reviewer(ar, lambda p: ar.approve(p.approval_id, reviewer="r"))
    with pytest.raises(httpx.HTTPStatusError):
        client.post("/v1/payouts", json={"amount": 1})
    thread.join()
    session = ar.get_session(session_id)
    assert [(a.api_name, a.status) for a in session.actions] == [
        ("POST /v1/orders", ActionStatus.ROLLED_BACK),
        ("POST /v1/payouts", ActionStatus.CLEARED),
        ("POST /v1/payouts", ActionStatus.FAILED),
    ]
    # the approved action is never rolled back, so the session keeps its stored status
    assert session.status is SessionStatus.ACTIVE


def test_rejecting_a_review_whose_undo_needs_approval_opens_a_rollback_approval(
    ar: AgentRein, service: FakeService
) -> None:
    ar.add_policy(name="review payouts", effect="REQUIRE_APPROVAL", api_name="POST /v1/payouts")
    client, session_id = start(ar, service, undo={"POST /v1/payouts": {"requireApproval": True}})
    client.post("/v1/payouts", json={"amount": 100})
    (review,) = ar.list_approvals(status="PENDING")
    decided = ar.reject(review.approval_id, reviewer="lead", reason="wrong amount")
    assert decided.status is ApprovalStatus.REJECTED
    (undo_approval,) = ar.list_approvals(status="PENDING")
    assert undo_approval.purpose is ApprovalPurpose.ROLLBACK
    assert ar.get_session(session_id).display_status is DisplayStatus.ROLLING_BACK
    ar.approve(undo_approval.approval_id, reviewer="lead")
    session = ar.get_session(session_id)
    assert session.actions[0].status is ActionStatus.ROLLED_BACK
    assert session.status is SessionStatus.ACTIVE  # a single-action rollback leaves the session going


def test_a_held_call_says_what_approving_and_rejecting_it_would_do(ar: AgentRein, service: FakeService) -> None:
    client, session_id = start(ar, service, requires_approval=["DELETE *"])
    first, second = (client.post("/v1/orders", json={}).json()["id"] for _ in range(2))
    host = service.base_url.removeprefix("http://")
    seen: list[ApprovalInfo] = []

    def look_then_reject(p: ApprovalInfo) -> None:
        seen.append(ar.get_approval(p.approval_id))
        seen.append(ar.list_approvals(status="PENDING")[0])
        ar.reject(p.approval_id, reviewer="lead@example.com")

    thread = reviewer(ar, look_then_reject)
    with pytest.raises(ApprovalRejectedError):
        client.delete(f"/v1/orders/{first}")
    thread.join()
    shown, listed = seen
    assert listed.consequences == shown.consequences  # the list carries the same as one request
    assert (shown.description, shown.connector, shown.target_host) == (f"Delete order {first} on {host}", "http", host)
    assert shown.consequences is not None and shown.outcome is None
    reject = shown.consequences.reject
    assert reject.summary.startswith("The agent's call does not run (the agent is told it was rejected), and the ")
    assert [(step.action, step.undo) for step in reject.steps] == [
        (f"Create order {second} on {host}", f"Delete /v1/orders/{second} on {host}"),
        (f"Create order {first} on {host}", f"Delete /v1/orders/{first} on {host}"),
    ]
    assert "Whether it can be undone is known only once it has run" in shown.consequences.approve.summary
    decided = ar.get_approval(shown.approval_id)
    assert decided.consequences is None
    assert decided.outcome == "Rejected: the agent's call did not run; the session was rolled back (2 undone)."
    assert ar.get_session(session_id).status is SessionStatus.ROLLED_BACK


def test_an_approved_review_says_so_until_a_rollback_undoes_its_action(ar: AgentRein, service: FakeService) -> None:
    ar.add_policy(name="review refunds", effect="REQUIRE_APPROVAL", api_name="POST /v1/refunds")
    client, session_id = start(ar, service)
    refund = client.post("/v1/refunds", json={"amount": 5}).json()["id"]
    (pending,) = ar.list_approvals(status="PENDING")
    assert pending.consequences is not None
    host = service.base_url.removeprefix("http://")
    assert pending.consequences.reject.summary == f"This one action is undone: Delete /v1/refunds/{refund} on {host}."
    ar.approve(pending.approval_id, reviewer="lead@example.com")
    assert ar.get_approval(pending.approval_id).outcome == "Approved: the action stays done."
    ar.rollback_session(session_id)
    undone = ar.get_approval(pending.approval_id).outcome
    assert undone is not None and undone.startswith("Approved, then undone by the rollback of ")

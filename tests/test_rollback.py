"""Rolling a session back: last in, first out, each inverse once, by the rules of the status reference §3."""

from __future__ import annotations

import threading
import time

import attrs
import httpx
import pytest

from agentrein import (
    ActionStatus,
    AgentRein,
    ApprovalPurpose,
    ApprovalStatus,
    DisplayStatus,
    InvalidTransitionError,
    RollbackFailedError,
    RollbackRefusedError,
    SessionStatus,
    UndoStatus,
    UndoUnavailableError,
)
from agentrein_testing import FakeService


def start(ar: AgentRein, service: FakeService, sandbox: bool = False, **options: object) -> tuple[httpx.Client, str]:
    session = ar.new_session(agent_id="onboarding-agent", intent="Onboard a customer", sandbox=sandbox)
    client = ar.wrap(httpx.Client(base_url=service.base_url), session, connector="http", **options)  # type: ignore[arg-type]
    return client, session.id


def test_rollback_undoes_actions_last_first(ar: AgentRein, service: FakeService) -> None:
    client, session_id = start(ar, service)
    ids = [client.post(f"/v1/{c}", json={"step": i}).json()["id"] for i, c in enumerate(["orders", "things", "notes"])]
    session = ar.rollback_session(session_id)
    deletes = [r.path for r in service.calls("DELETE")]
    assert deletes == [f"/v1/notes/{ids[2]}", f"/v1/things/{ids[1]}", f"/v1/orders/{ids[0]}"]
    assert [a.status for a in session.actions] == [ActionStatus.ROLLED_BACK] * 3
    assert [a.undo_status for a in session.actions] == [UndoStatus.DONE] * 3
    assert session.status is SessionStatus.ROLLED_BACK
    assert session.display_status is DisplayStatus.REVERTED
    assert all(service.collection(c) == {} for c in ("orders", "things", "notes"))


def test_each_inverse_carries_its_own_idempotency_key(ar: AgentRein, service: FakeService) -> None:
    client, session_id = start(ar, service)
    client.post("/v1/orders", json={})
    action = ar.rollback_session(session_id).actions[0]
    (delete,) = service.calls("DELETE")
    assert delete.idempotency_key == f"{action.idempotency_key}-undo"
    assert delete.idempotency_key != service.calls("POST")[0].idempotency_key


def test_actions_without_an_undo_are_skipped_and_stay_success(ar: AgentRein, service: FakeService) -> None:
    client, session_id = start(ar, service)
    order = client.post("/v1/orders", json={}).json()
    client.patch(f"/v1/orders/{order['id']}", json={"note": "x"})
    session = ar.rollback_session(session_id)
    assert [(a.status, a.undo_status) for a in session.actions] == [
        (ActionStatus.ROLLED_BACK, UndoStatus.DONE),
        (ActionStatus.SUCCESS, UndoStatus.SKIPPED),
    ]
    assert session.status is SessionStatus.ROLLED_BACK
    assert session.display_status is DisplayStatus.PARTIALLY_REVERTED


def test_a_failed_undo_stops_the_chain_and_fails_the_session(ar: AgentRein, service: FakeService) -> None:
    client, session_id = start(ar, service)
    first = client.post("/v1/orders", json={}).json()
    client.post("/v1/orders", json={})
    client.post("/v1/orders", json={})
    service.fail_next("DELETE", "/v1/orders/*", status=500)  # the undo of the third call fails
    with pytest.raises(RollbackFailedError) as failed:
        ar.rollback_session(session_id)
    session = failed.value.session
    assert failed.value.action == session.actions[2] and "500" in str(failed.value)
    read = ar.get_session(session_id)
    # A server's workers may attach intent verdicts to the actions meanwhile; the records are otherwise the same.
    assert attrs.evolve(session, actions=[attrs.evolve(a, verification=None) for a in session.actions]) == attrs.evolve(
        read, actions=[attrs.evolve(a, verification=None) for a in read.actions]
    )
    assert [a.status for a in session.actions] == [
        ActionStatus.SUCCESS,
        ActionStatus.SUCCESS,
        ActionStatus.ROLLBACK_FAILED,
    ]
    assert session.actions[2].undo_status is UndoStatus.FAILED
    assert "500" in (session.actions[2].error or "")
    assert session.status is SessionStatus.FAILED
    assert session.display_status is DisplayStatus.ROLLBACK_FAILED
    assert len(service.calls("DELETE")) == 1
    assert first["id"] in service.collection("orders")


def test_when_the_rollback_after_a_failed_call_fails_too_the_call_s_error_says_so(
    ar: AgentRein, service: FakeService
) -> None:
    """The agent still gets its own error, with the rollback's failure attached (attribute and note)."""
    client, session_id = start(ar, service)
    client.post("/v1/orders", json={})
    service.fail_next("DELETE", "/v1/orders/*", status=500)  # the undo of the first call will fail
    service.fail_next("POST", "/v1/things", status=400)  # the second call fails: the session is rolled back
    with pytest.raises(httpx.HTTPStatusError) as raised:
        client.post("/v1/things", json={})
    failure = getattr(raised.value, "agentrein_rollback_failure", None)
    assert isinstance(failure, RollbackFailedError)
    assert failure.action.status is ActionStatus.ROLLBACK_FAILED and failure.action.seq == 1
    assert any("rolled the session back, and that failed too" in note for note in raised.value.__notes__)
    assert ar.get_session(session_id).display_status is DisplayStatus.ROLLBACK_FAILED


def test_a_retried_rollback_resumes_with_the_failed_undo_first(ar: AgentRein, service: FakeService) -> None:
    client, session_id = start(ar, service)
    client.post("/v1/orders", json={})
    client.post("/v1/things", json={})
    service.fail_next("DELETE", "/v1/things/*", status=500)
    with pytest.raises(RollbackFailedError):
        ar.rollback_session(session_id)
    assert ar.get_session(session_id).status is SessionStatus.FAILED
    session = ar.rollback_session(session_id)  # an operator tries again on the FAILED session
    assert [r.path.split("/")[2] for r in service.calls("DELETE")] == ["things", "things", "orders"]
    assert [a.status for a in session.actions] == [ActionStatus.ROLLED_BACK] * 2
    assert session.status is SessionStatus.ROLLED_BACK


def test_transient_undo_failures_are_retried(ar: AgentRein, service: FakeService) -> None:
    client, session_id = start(ar, service)
    client.post("/v1/orders", json={})
    service.fail_next("DELETE", "/v1/orders/*", status=503, times=2)
    session = ar.rollback_session(session_id)
    assert session.actions[0].status is ActionStatus.ROLLED_BACK
    assert len({r.idempotency_key for r in service.calls("DELETE")}) == 1


def test_an_undo_of_something_already_gone_counts_as_done(ar: AgentRein, service: FakeService) -> None:
    client, session_id = start(ar, service)
    order = client.post("/v1/orders", json={}).json()
    httpx.delete(f"{service.base_url}/v1/orders/{order['id']}")  # someone else deleted it meanwhile
    assert ar.rollback_session(session_id).actions[0].status is ActionStatus.ROLLED_BACK


def test_an_undo_requiring_approval_waits_for_the_reviewer(ar: AgentRein, service: FakeService) -> None:
    client, session_id = start(ar, service, undo={"POST /v1/things": {"requireApproval": True}})
    client.post("/v1/orders", json={})
    client.post("/v1/things", json={})

    def reviewer() -> None:
        while not (pending := ar.list_approvals(status="PENDING")):
            threading.Event().wait(0.01)
        assert pending[0].purpose is ApprovalPurpose.ROLLBACK
        assert ar.get_session(session_id).display_status is DisplayStatus.ROLLING_BACK
        ar.approve(pending[0].approval_id, reviewer="ops@example.com")

    thread = threading.Thread(target=reviewer)
    thread.start()
    session = ar.rollback_session(session_id)
    thread.join()
    assert [a.status for a in session.actions] == [ActionStatus.ROLLED_BACK] * 2
    assert session.status is SessionStatus.ROLLED_BACK


def test_a_session_cannot_be_completed_while_its_rollback_runs(ar: AgentRein, service: FakeService) -> None:
    client, session_id = start(ar, service, undo={"POST /v1/things": {"requireApproval": True}})
    client.post("/v1/things", json={})
    refused: list[InvalidTransitionError] = []

    def agent_then_reviewer() -> None:
        while not (pending := ar.list_approvals(status="PENDING")):
            threading.Event().wait(0.01)
        try:
            ar.complete_session(session_id)  # the rollback waits for this undo's approval
        except InvalidTransitionError as exc:
            refused.append(exc)
        ar.approve(pending[0].approval_id, reviewer="ops@example.com")

    thread = threading.Thread(target=agent_then_reviewer)
    thread.start()
    session = ar.rollback_session(session_id)
    thread.join()
    assert len(refused) == 1 and "being rolled back" in str(refused[0])
    assert session.status is SessionStatus.ROLLED_BACK and session.completed_at is None


def test_a_declined_undo_keeps_the_action_and_fails_the_session(ar: AgentRein, service: FakeService) -> None:
    client, session_id = start(ar, service, undo={"POST /v1/things": {"requireApproval": True}})
    order = client.post("/v1/orders", json={}).json()
    thing = client.post("/v1/things", json={}).json()

    def reviewer() -> None:
        while not (pending := ar.list_approvals(status="PENDING")):
            threading.Event().wait(0.01)
        ar.reject(pending[0].approval_id, reviewer="ops@example.com", reason="keep it")

    thread = threading.Thread(target=reviewer)
    thread.start()
    session = ar.rollback_session(session_id)
    thread.join()
    assert [(a.status, a.undo_status) for a in session.actions] == [
        (ActionStatus.SUCCESS, UndoStatus.NONE),
        (ActionStatus.SUCCESS, UndoStatus.DECLINED),
    ]
    assert session.status is SessionStatus.FAILED
    assert service.calls("DELETE") == []
    assert thing["id"] in service.collection("things") and order["id"] in service.collection("orders")


def test_an_undecided_rollback_approval_expires_as_declined(ar: AgentRein, service: FakeService) -> None:
    client, session_id = start(ar, service, undo={"POST *": {"requireApproval": True}})
    client.post("/v1/orders", json={})
    session = ar.rollback_session(session_id, timeout_ms=200)
    assert session.actions[0].undo_status is UndoStatus.DECLINED
    assert session.approvals[0].status is ApprovalStatus.EXPIRED
    assert session.status is SessionStatus.FAILED


def test_a_rollback_approval_whose_time_ends_just_after_the_callers_wait_is_seen_to_its_end() -> None:
    """The approval a rollback opens is timed from its opening, a moment after the caller's wait began: its
    end falls just past the caller's deadline, and the caller still sees it declined, not left pending."""
    from types import SimpleNamespace

    from agentrein._waiting import until_rollback_ends
    from agentrein_core.statuses import RollbackStatus

    opened = time.monotonic()
    ends_at = opened + 0.25
    job = SimpleNamespace(rollback_id="rbk_1", status=RollbackStatus.WAITING_APPROVAL)
    decided = threading.Event()

    def approval() -> SimpleNamespace:
        expired = decided.is_set() or time.monotonic() >= ends_at
        status = ApprovalStatus.EXPIRED if expired else ApprovalStatus.PENDING
        remaining = 0.0 if expired else ends_at - time.monotonic()
        return SimpleNamespace(approval_id="apr_1", rollback_id="rbk_1", status=status, time_remaining=remaining)

    def wait_for_decision(approval_id: str, timeout: float) -> SimpleNamespace:
        time.sleep(max(0.0, min(timeout, ends_at - time.monotonic())))
        return approval()

    def advance(current: SimpleNamespace) -> SimpleNamespace:
        if approval().status is ApprovalStatus.EXPIRED:
            decided.set()
            current.status = RollbackStatus.FAILED
        return current

    looks = SimpleNamespace(
        active_rollback=lambda session_id: None if decided.is_set() else job,
        session_approvals=lambda session_id: [approval()],
        get_approval=lambda approval_id: approval(),
        wait_for_decision=wait_for_decision,
    )
    until_rollback_ends(looks, "ses_1", advance, wait=0.2)  # type: ignore[arg-type]
    assert decided.is_set()
    assert job.status is RollbackStatus.FAILED


def test_sandbox_rollback_flips_statuses_without_calling_the_service(ar: AgentRein, service: FakeService) -> None:
    client, session_id = start(ar, service, sandbox=True)
    client.post("/v1/orders", json={})
    client.post("/v1/orders", json={})
    session = ar.rollback_session(session_id)
    assert [a.status for a in session.actions] == [ActionStatus.ROLLED_BACK] * 2
    assert session.status is SessionStatus.ROLLED_BACK
    assert service.calls("DELETE") == []
    assert len(service.collection("orders")) == 2


def test_a_session_without_success_actions_cannot_be_rolled_back(ar: AgentRein) -> None:
    session = ar.new_session(agent_id="a", intent="i")
    with pytest.raises(RollbackRefusedError, match="no SUCCESS action"):
        ar.rollback_session(session)


def test_a_reverted_session_cannot_be_rolled_back_again(ar: AgentRein, service: FakeService) -> None:
    client, session_id = start(ar, service)
    client.post("/v1/orders", json={})
    ar.rollback_session(session_id)
    with pytest.raises(RollbackRefusedError):
        ar.rollback_session(session_id)
    assert len(service.calls("DELETE")) == 1


def test_a_completed_session_can_still_be_rolled_back_by_its_owner(ar: AgentRein, service: FakeService) -> None:
    client, session_id = start(ar, service)
    client.post("/v1/orders", json={})
    assert ar.complete_session(session_id).status is SessionStatus.COMPLETED
    assert ar.rollback_session(session_id).status is SessionStatus.ROLLED_BACK
    assert service.collection("orders") == {}


def test_a_rolled_back_session_accepts_no_new_actions(ar: AgentRein, service: FakeService) -> None:
    client, session_id = start(ar, service)
    client.post("/v1/orders", json={})
    ar.rollback_session(session_id)
    with pytest.raises(InvalidTransitionError, match="only ACTIVE sessions"):
        client.post("/v1/orders", json={})
    assert len(service.calls("POST")) == 1


def test_concurrent_rollback_requests_run_each_inverse_once(ar: AgentRein, service: FakeService) -> None:
    client, session_id = start(ar, service)
    for _ in range(5):
        client.post("/v1/orders", json={})
    errors: list[BaseException] = []

    def roll_back() -> None:
        try:
            ar.rollback_session(session_id)
        except RollbackRefusedError as exc:  # the second may arrive when the first is done
            errors.append(exc)

    threads = [threading.Thread(target=roll_back) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(service.calls("DELETE")) == 5
    assert ar.get_session(session_id).status is SessionStatus.ROLLED_BACK


def test_a_rollback_that_only_skips_leaves_the_session_readable_and_active(ar: AgentRein, service: FakeService) -> None:
    client, session_id = start(ar, service, undo={"POST *": {"type": "none"}})
    client.post("/v1/orders", json={})
    session = ar.rollback_session(session_id)
    assert session.actions[0].undo_status is UndoStatus.SKIPPED
    assert session.status is SessionStatus.ACTIVE  # nothing was reverted
    assert ar.list_sessions()[0].display_status is DisplayStatus.ACTIVE


def test_rolling_back_a_session_widens_a_one_action_rollback_under_way(
    embedded: AgentRein, database_url: str, service: FakeService
) -> None:
    embedded.add_policy(name="review refunds", effect="REQUIRE_APPROVAL", api_name="POST /v1/refunds")
    client, session_id = start(embedded, service)
    client.post("/v1/orders", json={})
    client.post("/v1/refunds", json={})
    client.post("/v1/notes", json={})
    # a reviewer in another process rejects the refund: that process cannot run the undo itself
    reviewer = AgentRein(database_url, organisation=embedded.organisation)
    (pending,) = reviewer.list_approvals(status="PENDING")
    reviewer.reject(pending.approval_id, reviewer="lead", reason="no refunds today")
    reviewer.close()
    session = embedded.rollback_session(session_id)
    assert [a.status for a in session.actions] == [ActionStatus.ROLLED_BACK] * 3
    assert [r.path.split("/")[2] for r in service.calls("DELETE")] == ["notes", "refunds", "orders"]
    assert session.status is SessionStatus.ROLLED_BACK


def test_a_session_being_rolled_back_accepts_no_new_action(ar: AgentRein, service: FakeService) -> None:
    client, session_id = start(ar, service, undo={"POST /v1/things": {"requireApproval": True}})
    client.post("/v1/things", json={})
    rolling = threading.Thread(target=ar.rollback_session, args=(session_id,), kwargs={"timeout_ms": 3_000})
    rolling.start()
    while not ar.list_approvals(status="PENDING"):
        threading.Event().wait(0.01)
    with pytest.raises(InvalidTransitionError, match="being rolled back"):
        client.post("/v1/orders", json={})
    ar.approve(ar.list_approvals(status="PENDING")[0].approval_id, reviewer="r")
    rolling.join()
    assert service.calls("POST", "/v1/orders") == []
    assert ar.get_session(session_id).status is SessionStatus.ROLLED_BACK


def test_another_process_finishes_a_rollback_once_it_wraps_a_client(
    embedded: AgentRein, database_url: str, service: FakeService
) -> None:
    client, session_id = start(embedded, service)
    client.post("/v1/orders", json={})
    client.post("/v1/things", json={})
    later = AgentRein(database_url, organisation=embedded.organisation)  # a new process: it holds no client yet
    try:
        with pytest.raises(UndoUnavailableError, match="connector 'http'"):
            later.rollback_session(session_id)
        assert later.get_session(session_id).actions[1].undo_status is UndoStatus.NONE  # nothing marked begun
        later.wrap(httpx.Client(base_url=service.base_url), session_id, connector="http")
        session = later.rollback_session(session_id)
    finally:
        later.close()
    assert [a.status for a in session.actions] == [ActionStatus.ROLLED_BACK] * 2
    assert len(service.calls("DELETE")) == 2


def test_rolled_back_actions_no_longer_wait_for_review(ar: AgentRein, service: FakeService) -> None:
    ar.add_policy(name="review all", effect="REQUIRE_APPROVAL")
    client, session_id = start(ar, service)
    client.post("/v1/orders", json={})
    session = ar.rollback_session(session_id)
    assert session.display_status is DisplayStatus.REVERTED
    assert ar.list_approvals(status="PENDING") == []
    assert session.approvals[0].status is ApprovalStatus.REJECTED
    assert session.approvals[0].reason == "the action was rolled back"


def test_a_rollback_started_while_a_later_call_runs_waits_for_its_outcome_and_undoes_it_first(
    ar: AgentRein, service: FakeService
) -> None:
    """Strict last-first: the call still under way when the rollback starts may succeed, and then its effect
    is the first to go (a subscription before the customer it belongs to)."""
    client, session_id = start(ar, service)
    first = client.post("/v1/orders", json={"n": 1}).json()["id"]
    arrived, release = service.hold("POST", "/v1/things")
    second: list[str] = []
    call = threading.Thread(target=lambda: second.append(client.post("/v1/things", json={"n": 2}).json()["id"]))
    call.start()
    assert arrived.wait(timeout=30)  # the second call is recorded, cleared and under way
    rollback = threading.Thread(target=ar.rollback_session, args=(session_id,))
    rollback.start()
    time.sleep(1.0)  # the time a rollback that does not wait takes to undo the first call (well under 0.5 s)
    release.set()
    call.join(timeout=30)
    rollback.join(timeout=60)
    deletes = [r.path for r in service.calls("DELETE")]
    assert deletes == [f"/v1/things/{second[0]}", f"/v1/orders/{first}"]
    assert ar.get_session(session_id).display_status is DisplayStatus.REVERTED


def test_a_rollback_waits_for_nothing_once_no_later_call_may_still_succeed() -> None:
    """The pure step: a later call cleared to run is waited for; an earlier one, or none, is not; nor is any
    call in a one-action undo (a reviewer's rejection of that action alone)."""
    from datetime import UTC, datetime

    from agentrein_core import rollback
    from agentrein_core.model import Action, Rollback, UndoConfig
    from agentrein_core.statuses import OperationType, RollbackStatus

    now = datetime.now(UTC)

    def action(seq: int, status: ActionStatus) -> Action:
        return Action(
            f"act_{seq}", "ses_1", "org_1", seq, "http", "POST /v1/orders", OperationType.CREATE, {}, status,
            f"key_{seq}", now, now, undo=UndoConfig("http-delete", {"url": f"http://127.0.0.1/v1/orders/{seq}"}),
        )  # fmt: skip

    def job(whole_session: bool) -> Rollback:
        return Rollback("rbk_1", "org_1", "ses_1", RollbackStatus.RUNNING, "test", "operator", now, whole_session)

    done, running = action(1, ActionStatus.SUCCESS), action(2, ActionStatus.CLEARED)
    assert rollback.next_step(job(True), [done], [], [running]) == rollback.WaitForConfirmation(running)
    assert rollback.next_step(job(True), [], [], [running]) == rollback.WaitForConfirmation(running)
    assert rollback.next_step(job(True), [done], [], []) == rollback.RunUndo(done)
    later_done, earlier_running = action(3, ActionStatus.SUCCESS), action(2, ActionStatus.CLEARED)
    assert rollback.next_step(job(True), [later_done], [], [earlier_running]) == rollback.RunUndo(later_done)
    rejected = attrs.evolve(done, undo_requested=True)
    assert rollback.next_step(job(False), [rejected], [], [running]) == rollback.RunUndo(rejected)

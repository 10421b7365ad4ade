"""Engine rules that depend on time, plans and crashes, checked with a clock the test controls."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from agentrein_core.commands import Confirmed, Failed, NewPolicy, WriteAhead
from agentrein_core.engine import Engine, LoggedAction
from agentrein_core.errors import (
    ApprovalRejectedError,
    InvalidTransitionError,
    NotFoundError,
    PolicyBlockedError,
    UnknownConnectorError,
    ValidationError,
)
from agentrein_core.model import Action, UndoConfig
from agentrein_core.plugins import installed_connectors
from agentrein_core.statuses import (
    ActionStatus,
    ApprovalStatus,
    OperationType,
    Plan,
    RollbackStatus,
    SessionStatus,
    UndoStatus,
)
from agentrein_core.store import Store
from agentrein_core.store.sessions import Actions, Sessions


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


class RecordingExecutor:
    """Runs 'inverses' by recording them; can be told to die mid-call (as a killed process would)."""

    def __init__(self) -> None:
        self.undone: list[tuple[str, str]] = []
        self.crash_on: str | None = None

    def can_run(self, action: Action) -> bool:
        return True

    hands_over = False

    def run_undo(self, action: Action) -> None:
        self.undone.append((action.action_id, action.undo_idempotency_key))
        if action.action_id == self.crash_on:
            self.crash_on = None
            raise SystemExit("killed after the inverse was sent")


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def engine(database_url: str, clock: Clock) -> Engine:
    return Engine(Store(database_url), clock=clock)


def log(engine: Engine, org_id: str, session_id: str, api_name: str = "things.create", **options: Any) -> LoggedAction:
    """Record one call of the fake connector before it runs."""
    operation = OperationType.DELETE if api_name.endswith(".delete") else OperationType.CREATE
    return engine.recording.log_action(
        org_id,
        session_id,
        WriteAhead(connector="fake", api_name=api_name, operation_type=operation, payload={}, **options),
    )


def run_actions(engine: Engine, org_id: str, session_id: str, n: int, undo: str = "fake-delete") -> list[Action]:
    done = []
    for i in range(n):
        logged = log(engine, org_id, session_id, f"things.create#{i}")
        done.append(
            engine.recording.confirm_action(
                org_id, logged.action.action_id, Confirmed(response={}, undo=UndoConfig(undo))
            )
        )
    return done


def test_an_approved_action_not_confirmed_within_an_hour_is_flagged_unconfirmed(engine: Engine, clock: Clock) -> None:
    org = engine.accounts.ensure_organisation("o")
    session = engine.recording.new_session(org.org_id, "agent", "intent")
    logged = log(
        engine,
        org.org_id,
        session.session_id,
        "payouts.create",
        requires_approval=True,
        approval_timeout=timedelta(hours=2),
    )
    assert logged.approval is not None
    engine.reviews.approve(org.org_id, logged.approval.approval_id, "reviewer")
    clock.advance(minutes=59)
    assert engine.reviews.list_approvals(org.org_id)[0].unconfirmed is False
    clock.advance(minutes=2)
    (flagged,) = engine.reviews.list_approvals(org.org_id)
    assert flagged.unconfirmed is True and flagged.action_status is ActionStatus.CLEARED
    engine.recording.confirm_action(org.org_id, logged.action.action_id, Confirmed(response={}, undo=None))
    assert engine.reviews.list_approvals(org.org_id)[0].unconfirmed is False


def test_failing_a_held_action_closes_its_approval_saying_why(engine: Engine) -> None:
    org = engine.accounts.create_organisation(f"held-{uuid.uuid4().hex[:8]}", Plan.TEAM)
    session = engine.recording.new_session(org.org_id, "agent", "intent")
    logged = log(engine, org.org_id, session.session_id, "payouts.create", requires_approval=True)
    assert logged.approval is not None
    assert (
        engine.recording.fail_action(org.org_id, logged.action.action_id, Failed(error="the agent gave up")).status
        == "FAILED"
    )
    view = engine.recording.get_session(org.org_id, session.session_id)
    (closed,) = view.approvals
    assert (closed.status, closed.resolved_by) == (ApprovalStatus.REJECTED, "agentrein")
    assert closed.reason == "the action failed before a decision"
    assert view.display_status == "FAILED"  # no longer AWAITING_APPROVAL
    assert engine.reviews.list_approvals(org.org_id, ApprovalStatus.PENDING) == []
    with pytest.raises(InvalidTransitionError, match="REJECTED by agentrein: the action failed before a decision"):
        engine.reviews.approve(org.org_id, closed.approval_id, "reviewer")


def test_withdrawing_a_request_a_reviewer_decided_meanwhile_says_who_decided_it_and_why(engine: Engine) -> None:
    org = engine.accounts.create_organisation(f"held-{uuid.uuid4().hex[:8]}", Plan.TEAM)
    session = engine.recording.new_session(org.org_id, "agent", "intent")
    logged = log(engine, org.org_id, session.session_id, "payouts.create", requires_approval=True)
    assert logged.approval is not None
    engine.reviews.reject(org.org_id, logged.approval.approval_id, "ada", "too large")
    with pytest.raises(InvalidTransitionError, match="already REJECTED by ada: too large"):
        engine.reviews.withdraw(org.org_id, logged.approval.approval_id, "the agent was interrupted")


def test_a_wait_that_ends_leaves_alone_what_a_newer_wait_of_the_agent_noted(engine: Engine, clock: Clock) -> None:
    org = engine.accounts.create_organisation(f"waits-{uuid.uuid4().hex[:8]}", Plan.TEAM)
    session = engine.recording.new_session(org.org_id, "agent", "intent")
    logged = log(engine, org.org_id, session.session_id, "payouts.create", requires_approval=True)
    assert logged.approval is not None
    approval_id = logged.approval.approval_id

    def noted() -> datetime | None:
        with engine.store.transaction(write=False) as tx:
            found = tx.approvals.get(org.org_id, approval_id)
            assert found is not None
            return found.waited_until

    first = threading.Thread(target=engine.reviews.wait_for_decision, args=(org.org_id, approval_id, 1.0))
    first.start()
    while (first_noted := noted()) is None:
        time.sleep(0.01)
    second = threading.Thread(target=engine.reviews.wait_for_decision, args=(org.org_id, approval_id, 60.0))
    second.start()  # the agent asks again (its connection broke, say) while the first wait still runs
    while (second_noted := noted()) == first_noted:
        time.sleep(0.01)
    first.join()
    assert second_noted is not None and second_noted > clock() + timedelta(seconds=50)
    assert noted() == second_noted  # the newer wait is still open: the agent still waits
    engine.reviews.approve(org.org_id, approval_id, "ada")
    second.join()
    assert noted() == clock()


def test_sessions_idle_for_24_hours_are_abandoned(engine: Engine, clock: Clock) -> None:
    org = engine.accounts.ensure_organisation("o")
    idle = engine.recording.new_session(org.org_id, "agent", "intent")
    busy = engine.recording.new_session(org.org_id, "agent", "intent")
    clock.advance(hours=20)
    run_actions(engine, org.org_id, busy.session_id, 1)
    clock.advance(hours=4, seconds=1)
    report = engine.maintenance.maintain()
    assert report.abandoned_sessions >= 1  # other tests of this module share the database
    assert engine.recording.get_session(org.org_id, idle.session_id).status is SessionStatus.ABANDONED
    assert engine.recording.get_session(org.org_id, busy.session_id).status is SessionStatus.ACTIVE


def test_after_execution_approvals_expire_without_consequence(engine: Engine, clock: Clock) -> None:
    org = engine.accounts.ensure_organisation("o")
    engine.policies.add_policy(org.org_id, NewPolicy("review", "REQUIRE_APPROVAL"))
    session = engine.recording.new_session(org.org_id, "agent", "intent")
    run_actions(engine, org.org_id, session.session_id, 1)
    clock.advance(hours=24, seconds=1)
    assert engine.maintenance.maintain().expired_approvals >= 1
    view = engine.recording.get_session(org.org_id, session.session_id)
    assert view.approvals[0].status is ApprovalStatus.EXPIRED
    assert view.actions[0].status is ActionStatus.SUCCESS
    assert engine.rollbacks.rollbacks_to_run(org.org_id) == []


def test_the_free_plan_has_no_approval_gates(engine: Engine) -> None:
    org = engine.accounts.ensure_organisation("free-org", plan=Plan.FREE)
    session = engine.recording.new_session(org.org_id, "agent", "intent")
    run_actions(engine, org.org_id, session.session_id, 1)
    with pytest.raises(ApprovalRejectedError, match="plan has no approval gates"):
        log(engine, org.org_id, session.session_id, "x.delete", requires_approval=True)
    view = engine.recording.get_session(org.org_id, session.session_id)
    assert [a.status for a in view.actions] == [ActionStatus.SUCCESS, ActionStatus.FAILED]
    assert view.approvals == []
    (job,) = engine.rollbacks.rollbacks_to_run(org.org_id)
    assert job.session_id == session.session_id


def test_the_free_plan_cannot_add_a_policy_that_holds_calls(engine: Engine) -> None:
    org = engine.accounts.ensure_organisation("free-org", plan=Plan.FREE)
    with pytest.raises(ValidationError, match="plan has no approval gates") as raised:
        engine.policies.add_policy(org.org_id, NewPolicy("hold", "REQUIRE_APPROVAL", before_execution=True))
    assert raised.value.field == "before_execution"
    assert engine.policies.list_policies(org.org_id) == []


def test_a_rollback_killed_mid_inverse_resumes_and_repeats_that_inverse_with_the_same_key(
    engine: Engine, clock: Clock
) -> None:
    org = engine.accounts.ensure_organisation("o")
    session = engine.recording.new_session(org.org_id, "agent", "intent")
    first, second, third = run_actions(engine, org.org_id, session.session_id, 3)
    job = engine.rollbacks.request_rollback(org.org_id, session.session_id, caller_role="agent", requested_by="t")
    executor = RecordingExecutor()
    executor.crash_on = second.action_id
    with pytest.raises(SystemExit):
        engine.rollbacks.run_rollback(org.org_id, job.rollback_id, executor)
    view = engine.recording.get_session(org.org_id, session.session_id)
    assert [a.undo_status for a in view.actions] == [UndoStatus.NONE, UndoStatus.IN_PROGRESS, UndoStatus.DONE]
    # the crashed worker's lease blocks others until it runs out
    assert (
        engine.rollbacks.run_rollback(org.org_id, job.rollback_id, RecordingExecutor()).status is RollbackStatus.RUNNING
    )
    clock.advance(seconds=61)
    resumed = engine.rollbacks.run_rollback(org.org_id, job.rollback_id, executor)
    assert resumed.status is RollbackStatus.SUCCEEDED
    assert [a for a, _ in executor.undone] == [
        third.action_id,
        second.action_id,
        second.action_id,
        first.action_id,
    ]
    assert executor.undone[1][1] == executor.undone[2][1] == second.undo_idempotency_key
    assert engine.recording.get_session(org.org_id, session.session_id).status is SessionStatus.ROLLED_BACK


def test_an_agent_may_roll_back_only_active_sessions(engine: Engine) -> None:
    from agentrein_core.errors import RollbackRefusedError

    org = engine.accounts.ensure_organisation("o")
    session = engine.recording.new_session(org.org_id, "agent", "intent")
    run_actions(engine, org.org_id, session.session_id, 1)
    engine.recording.complete_session(org.org_id, session.session_id)
    with pytest.raises(RollbackRefusedError, match="agent may roll back only sessions that are ACTIVE"):
        engine.rollbacks.request_rollback(org.org_id, session.session_id, caller_role="agent", requested_by="t")
    job = engine.rollbacks.request_rollback(org.org_id, session.session_id, caller_role="operator", requested_by="t")
    assert job.status is RollbackStatus.RUNNING


def test_a_rollbacks_trigger_is_redacted_then_cut_to_what_a_rollback_keeps(engine: Engine) -> None:
    org = engine.accounts.ensure_organisation("o")
    session = engine.recording.new_session(org.org_id, "agent", "intent")
    run_actions(engine, org.org_id, session.session_id, 1)
    card = "4242 4242 4242 4242"
    padding = "x" * 190
    trigger = f"{padding} {card} and more text than a rollback keeps"
    job = engine.rollbacks.request_rollback(
        org.org_id, session.session_id, caller_role="operator", requested_by="t", trigger=trigger
    )
    assert job.trigger == f"{padding} [REDACTED] and more text than a rollback keeps"[:200]
    assert card not in job.trigger and len(job.trigger) == 200


def test_another_organisations_records_are_not_found(engine: Engine) -> None:
    mine = engine.accounts.ensure_organisation("mine")
    theirs = engine.accounts.ensure_organisation("theirs")
    session = engine.recording.new_session(theirs.org_id, "agent", "intent")
    with pytest.raises(NotFoundError):
        engine.recording.get_session(mine.org_id, session.session_id)
    with pytest.raises(NotFoundError):
        engine.rollbacks.request_rollback(mine.org_id, session.session_id, caller_role="operator", requested_by="t")


@pytest.mark.parametrize("chosen", ["ses_1", "ses_" + "A" * 32, "act_" + "a" * 32, "ses_" + "a" * 32 + "/x", ""])
def test_an_embedded_engine_refuses_a_chosen_session_id_not_of_its_own_shape(engine: Engine, chosen: str) -> None:
    org = engine.accounts.ensure_organisation("mine")
    with pytest.raises(ValidationError, match=r"^id: must be an id of AgentRein's shape"):
        engine.recording.new_session(org.org_id, "agent", "intent", session_id=chosen)
    assert engine.recording.list_sessions(org.org_id).sessions == []


def test_an_embedded_engine_refuses_another_organisations_session_id_as_it_refuses_its_own(engine: Engine) -> None:
    mine = engine.accounts.ensure_organisation("mine")
    theirs = engine.accounts.ensure_organisation("theirs")
    their_id, my_id = f"ses_{uuid.uuid4().hex}", f"ses_{uuid.uuid4().hex}"
    engine.recording.new_session(theirs.org_id, "agent", "intent", session_id=their_id)
    engine.recording.new_session(mine.org_id, "agent", "intent", session_id=my_id)
    with pytest.raises(InvalidTransitionError) as taken_there:
        engine.recording.new_session(mine.org_id, "agent", "intent", session_id=their_id)
    with pytest.raises(InvalidTransitionError) as taken_here:
        engine.recording.new_session(mine.org_id, "another agent", "intent", session_id=my_id)
    assert str(taken_there.value) == str(taken_here.value) and their_id not in str(taken_there.value)
    assert [s.id for s in engine.recording.list_sessions(mine.org_id).sessions] == [my_id]


def test_a_failure_marks_the_session_active_at_the_time_of_failure(engine: Engine, clock: Clock) -> None:
    org = engine.accounts.ensure_organisation("o")
    session = engine.recording.new_session(org.org_id, "agent", "intent")
    logged = log(engine, org.org_id, session.session_id)
    clock.advance(hours=3)
    engine.recording.fail_action(org.org_id, logged.action.action_id, Failed(error="boom"))
    view = engine.recording.get_session(org.org_id, session.session_id)
    assert view.status is SessionStatus.FAILED
    assert view.last_activity_at == clock.now


def test_a_recorded_call_refreshes_the_sessions_last_activity_only_once_it_is_a_minute_old(
    engine: Engine, clock: Clock
) -> None:
    org = engine.accounts.ensure_organisation("o")
    session = engine.recording.new_session(org.org_id, "agent", "intent")
    opened = clock.now
    clock.advance(seconds=59)
    log(engine, org.org_id, session.session_id)
    assert engine.recording.get_session(org.org_id, session.session_id).last_activity_at == opened
    clock.advance(seconds=1)
    log(engine, org.org_id, session.session_id)
    assert engine.recording.get_session(org.org_id, session.session_id).last_activity_at == clock.now


def test_a_confirmed_call_writes_no_intent_check_and_the_next_round_queues_one_per_call(engine: Engine) -> None:
    org = engine.accounts.ensure_organisation(f"o-{uuid.uuid4().hex[:8]}")  # its own: the database is shared
    session = engine.recording.new_session(org.org_id, "agent", "intent")
    run_actions(engine, org.org_id, session.session_id, 2)
    checks = [a.verification for a in engine.recording.get_session(org.org_id, session.session_id).actions]
    assert checks == [None, None]  # found from the session's watermark, not queued by the calls
    assert engine.intent_checks.queue_wanted(org.org_id) == 2
    assert engine.intent_checks.queue_wanted(org.org_id) == 0
    actions = engine.recording.get_session(org.org_id, session.session_id).actions
    assert all(a.verification is not None for a in actions)


def test_a_call_still_under_way_has_its_check_queued_once_confirmed_and_no_later_call_is_checked_twice(
    engine: Engine,
) -> None:
    org = engine.accounts.ensure_organisation(f"o-{uuid.uuid4().hex[:8]}")  # its own: the database is shared
    session = engine.recording.new_session(org.org_id, "agent", "intent")
    under_way = log(engine, org.org_id, session.session_id)  # CLEARED: the watermark stays below it
    run_actions(engine, org.org_id, session.session_id, 1)
    assert engine.intent_checks.queue_wanted(org.org_id) == 1
    engine.recording.confirm_action(org.org_id, under_way.action.action_id, Confirmed(response={}))
    assert engine.intent_checks.queue_wanted(org.org_id) == 1
    actions = engine.recording.get_session(org.org_id, session.session_id).actions
    assert [a.verification is not None for a in actions] == [True, True]


def test_a_sessions_wanted_checks_are_taken_by_one_supervisor_only(engine: Engine) -> None:
    org = engine.accounts.ensure_organisation(f"o-{uuid.uuid4().hex[:8]}")  # its own: the database is shared
    session = engine.recording.new_session(org.org_id, "agent", "intent")
    run_actions(engine, org.org_id, session.session_id, 1)
    with engine.store.transaction(write=False) as tx:
        (seen,) = tx.sessions.checks_due(org.org_id, 100)  # what a second supervisor found due, at the same time
    assert engine.intent_checks.queue_wanted(org.org_id) == 1
    with engine.store.transaction() as tx:
        assert tx.sessions.take_checks_due(seen) is None  # the second finds them taken: nothing queued twice


def test_a_call_confirmed_while_the_supervisor_queues_its_sessions_checks_is_still_checked(
    postgres_url: str, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # PostgreSQL only: there the confirmation and the supervisor's round run at once (SQLite runs one after the other).
    engine = Engine(Store(postgres_url), clock=clock)
    org = engine.accounts.ensure_organisation(f"o-{uuid.uuid4().hex[:8]}")
    session = engine.recording.new_session(org.org_id, "agent", "intent")
    under_way = log(engine, org.org_id, session.session_id)
    run_actions(engine, org.org_id, session.session_id, 1)  # marks the session: the confirmation below finds it marked
    marked, release = threading.Event(), threading.Event()
    want_check = Sessions.want_check

    def held_before_commit(sessions: Sessions, session_id: str) -> None:
        want_check(sessions, session_id)
        marked.set()
        release.wait(timeout=30)

    monkeypatch.setattr(Sessions, "want_check", held_before_commit)
    confirmation = threading.Thread(
        target=engine.recording.confirm_action, args=(org.org_id, under_way.action.action_id, Confirmed(response={}))
    )
    confirmation.start()
    try:
        assert marked.wait(timeout=30)
        assert engine.intent_checks.queue_wanted(org.org_id) == 1  # the call that had run: the other is not yet
    finally:
        release.set()
        confirmation.join(timeout=30)
    assert engine.intent_checks.queue_wanted(org.org_id) == 1  # the call confirmed meanwhile: not lost
    actions = engine.recording.get_session(org.org_id, session.session_id).actions
    assert [a.verification is not None for a in actions] == [True, True]
    engine.store.close()


def test_the_supervisors_round_leaves_an_action_being_rolled_back_for_later_instead_of_deadlocking(
    postgres_url: str, clock: Clock
) -> None:
    # A rollback's transaction writes the action, then its session; the round holds the session and would wait for
    # the action: PostgreSQL broke that deadlock by failing the rollback's write (seen in CI).
    engine = Engine(Store(postgres_url), clock=clock)
    org = engine.accounts.ensure_organisation(f"o-{uuid.uuid4().hex[:8]}")
    session = engine.recording.new_session(org.org_id, "agent", "intent")
    (action,) = run_actions(engine, org.org_id, session.session_id, 1)
    rolled_back = sa.create_engine(postgres_url)
    with rolled_back.connect() as conn, conn.begin():
        actions, sessions = (
            sa.table("actions", sa.column("action_id"), sa.column("error")),
            sa.table("sessions", sa.column("session_id"), sa.column("intent")),
        )
        conn.execute(actions.update().where(actions.c.action_id == action.action_id).values(error="undo failed"))
        queued: list[int] = []
        round_ = threading.Thread(target=lambda: queued.append(engine.intent_checks.queue_wanted(org.org_id)))
        round_.start()
        round_.join(timeout=10)
        conn.execute(sessions.update().where(sessions.c.session_id == session.session_id).values(intent="intent"))
    round_.join(timeout=30)
    rolled_back.dispose()
    assert queued == [0]  # the action was being written: its check is left for the next round, not lost
    assert engine.intent_checks.queue_wanted(org.org_id) == 1
    assert engine.recording.get_session(org.org_id, session.session_id).actions[0].verification is not None
    engine.store.close()


def test_a_held_calls_card_in_a_long_session_lists_twenty_undos_and_counts_the_others(engine: Engine) -> None:
    org = engine.accounts.ensure_organisation(f"o-{uuid.uuid4().hex[:8]}")  # its own: the database is shared
    session = engine.recording.new_session(org.org_id, "agent", "intent")
    run_actions(engine, org.org_id, session.session_id, 25)
    held = log(engine, org.org_id, session.session_id, "things.delete", requires_approval=True)
    assert held.approval is not None
    for card in (
        engine.reviews.get_approval(org.org_id, held.approval.approval_id),
        engine.reviews.approval_page(org.org_id, ApprovalStatus.PENDING, limit=10).approvals[0],
    ):
        assert card.consequences is not None
        reject = card.consequences.reject
        assert "25 actions are undone, last done first" in reject.summary
        assert [step.seq for step in reject.steps] == list(range(25, 5, -1))
        assert reject.more_steps == 5


def test_approvals_read_page_by_page_come_pending_first_then_the_others_each_oldest_first_and_each_once(
    engine: Engine, clock: Clock
) -> None:
    org = engine.accounts.create_organisation(f"pages-{uuid.uuid4().hex[:8]}", Plan.TEAM)
    held = []
    for _ in range(7):
        session = engine.recording.new_session(org.org_id, "agent", "intent")
        logged = log(engine, org.org_id, session.session_id, "payouts.create", requires_approval=True)
        assert logged.approval is not None
        held.append(logged.approval.approval_id)
        clock.advance(seconds=1)
    for i in (0, 2, 5):  # the oldest, and two between: decided, they come after every pending one
        engine.reviews.reject(org.org_id, held[i], "ada", "no")
    pending = [held[i] for i in (1, 3, 4, 6)]
    decided = [held[i] for i in (0, 2, 5)]

    def paged(status: ApprovalStatus | None, limit: int) -> list[str]:
        read, cursor = [], None
        while True:
            page = engine.reviews.approval_page(org.org_id, status, limit=limit, cursor=cursor, explained=False)
            read += [info.approval_id for info in page.approvals]
            if page.next_cursor is None:
                return read
            cursor = page.next_cursor

    for limit in (1, 2, 3, 4, 100):
        assert paged(None, limit) == pending + decided
        assert paged(ApprovalStatus.PENDING, limit) == pending
        assert paged(ApprovalStatus.REJECTED, limit) == decided
    assert [info.approval_id for info in engine.reviews.list_approvals(org.org_id)] == pending + decided


def test_a_reviewers_queue_puts_the_calls_agents_wait_for_first_then_the_reviews_each_least_time_left_first(
    engine: Engine, clock: Clock
) -> None:
    org = engine.accounts.create_organisation(f"queue-{uuid.uuid4().hex[:8]}", Plan.TEAM)
    engine.policies.add_policy(org.org_id, NewPolicy("review", "REQUIRE_APPROVAL", api_name="things.*"))

    def held(minutes: int) -> str:
        session = engine.recording.new_session(org.org_id, "agent", "intent")
        logged = log(
            engine, org.org_id, session.session_id, "payouts.create", requires_approval=True,
            approval_timeout=timedelta(minutes=minutes),
        )  # fmt: skip
        assert logged.approval is not None
        clock.advance(seconds=1)
        return logged.approval.approval_id

    def reviewed() -> str:
        session = engine.recording.new_session(org.org_id, "agent", "intent")
        run_actions(engine, org.org_id, session.session_id, 1)
        (review,) = engine.recording.get_session(org.org_id, session.session_id).approvals
        clock.advance(seconds=1)
        return review.approval_id

    older_review, in_an_hour, refused, in_ten_minutes, newer_review = (
        reviewed(), held(60), held(30), held(10), reviewed()
    )  # fmt: skip
    engine.reviews.reject(org.org_id, refused, "ada", "no")
    pending, decided, waiting = engine.reviews.approval_queue(org.org_id)
    assert [p.approval_id for p in pending] == [in_ten_minutes, in_an_hour, older_review, newer_review]
    assert ([d.approval_id for d in decided], waiting) == ([refused], 4)
    for shown in (1, 2, 3):
        first, _, _ = engine.reviews.approval_queue(org.org_id, shown=shown)
        assert [p.approval_id for p in first] == [p.approval_id for p in pending][:shown]


def test_a_session_read_with_no_actions_or_more_than_a_page_of_them_is_refused_with_a_clear_error(
    engine: Engine,
) -> None:
    org = engine.accounts.ensure_organisation(f"o-{uuid.uuid4().hex[:8]}")  # its own: the database is shared
    session = engine.recording.new_session(org.org_id, "agent", "intent")
    run_actions(engine, org.org_id, session.session_id, 2)
    for wrong in (0, 1001, True):
        with pytest.raises(ValidationError, match="first_actions: must be a whole number from 1 to 1000"):
            engine.recording.get_session(org.org_id, session.session_id, first_actions=wrong)


def test_a_held_calls_card_read_while_a_reviewer_approves_it_counts_from_one_snapshot(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    org = engine.accounts.ensure_organisation(f"o-{uuid.uuid4().hex[:8]}")  # its own: the database is shared
    session = engine.recording.new_session(org.org_id, "agent", "intent", sandbox=True)
    held = log(engine, org.org_id, session.session_id, requires_approval=True)
    assert held.approval is not None
    tallies = Actions.tallies

    def approved_meanwhile(actions: Actions, *args: Any, **kwargs: Any) -> Any:
        # The card's approval and action are read; the reviewer approves before its session's actions are counted.
        if not approved:
            approved.append(engine.reviews.approve(org.org_id, held.approval.approval_id, reviewer="lead"))
        return tallies(actions, *args, **kwargs)

    approved: list[Any] = []
    monkeypatch.setattr(Actions, "tallies", approved_meanwhile)
    card = engine.reviews.get_approval(org.org_id, held.approval.approval_id)
    assert approved and card.consequences is not None  # read as pending: one snapshot, before the approval
    reject = card.consequences.reject
    assert (reject.steps, reject.more_steps) == ([], 0)
    assert reject.summary.endswith("Nothing done before it is left to undo.")  # not "-1 actions are undone"


def test_each_organisation_is_held_to_its_own_plan_and_policies(engine: Engine) -> None:
    team = engine.accounts.create_organisation(f"team-{uuid.uuid4().hex[:8]}", Plan.TEAM)
    free = engine.accounts.create_organisation(f"free-{uuid.uuid4().hex[:8]}", Plan.FREE)
    engine.policies.add_policy(free.org_id, NewPolicy("no creates", "BLOCK", operation_type="CREATE"))
    team_session = engine.recording.new_session(team.org_id, "agent")
    free_session = engine.recording.new_session(free.org_id, "agent")
    assert log(engine, team.org_id, team_session.session_id, requires_approval=True).approval is not None
    assert log(engine, team.org_id, team_session.session_id).action.status is ActionStatus.CLEARED
    with pytest.raises(PolicyBlockedError):
        log(engine, free.org_id, free_session.session_id)
    with pytest.raises(ApprovalRejectedError, match="plan"):
        log(engine, free.org_id, free_session.session_id, "things.delete", requires_approval=True)


def test_a_job_that_fails_by_our_own_fault_does_not_hold_up_the_others(own_database_url: str, clock: Clock) -> None:
    engine = Engine(Store(own_database_url), clock=clock)
    org = engine.accounts.ensure_organisation(f"o-{uuid.uuid4().hex[:8]}")
    stuck, fine = (engine.recording.new_session(org.org_id, "agent") for _ in range(2))
    for session in (stuck, fine):
        run_actions(engine, org.org_id, session.session_id, 1)
        engine.rollbacks.request_rollback(org.org_id, session.session_id, caller_role="agent", requested_by="t")
        clock.advance(seconds=1)

    class Broken(RecordingExecutor):
        def can_run(self, action: Action) -> bool:
            if action.session_id == stuck.session_id:
                raise RuntimeError("a bug of ours")
            return True

    executor = Broken()
    with pytest.raises(RuntimeError):
        engine.rollbacks.run_next_rollback(executor)  # the oldest job first
    done = engine.rollbacks.run_next_rollback(executor)
    assert done is not None and done.session_id == fine.session_id and done.status is RollbackStatus.SUCCEEDED
    assert (
        engine.rollbacks.run_next_rollback(executor) is None
    )  # the broken one waits a little before it is tried again
    clock.advance(seconds=6)
    with pytest.raises(RuntimeError):
        engine.rollbacks.run_next_rollback(executor)


def test_a_slow_inverse_keeps_its_job_so_no_other_worker_repeats_it(own_database_url: str) -> None:
    engine = Engine(Store(own_database_url), rollback_lease=timedelta(seconds=0.3))
    org = engine.accounts.ensure_organisation(f"o-{uuid.uuid4().hex[:8]}")
    session = engine.recording.new_session(org.org_id, "agent")
    run_actions(engine, org.org_id, session.session_id, 1)
    engine.rollbacks.request_rollback(org.org_id, session.session_id, caller_role="agent", requested_by="t")
    started = threading.Event()

    class Slow(RecordingExecutor):
        def run_undo(self, action: Action) -> None:
            started.set()
            time.sleep(1.2)  # four leases long
            super().run_undo(action)

    slow, other = Slow(), RecordingExecutor()
    worker = threading.Thread(target=engine.rollbacks.run_next_rollback, args=(slow,))
    worker.start()
    started.wait(timeout=10)
    try:
        while worker.is_alive():
            assert engine.rollbacks.run_next_rollback(other) is None
            time.sleep(0.05)
    finally:
        worker.join()
    assert len(slow.undone) == 1 and other.undone == []
    assert engine.recording.get_session(org.org_id, session.session_id).status is SessionStatus.ROLLED_BACK


def test_reporting_the_failure_of_an_approved_action_twice_records_it_once(engine: Engine) -> None:
    org = engine.accounts.ensure_organisation(f"o-{uuid.uuid4().hex[:8]}")
    session = engine.recording.new_session(org.org_id, "agent")
    logged = log(engine, org.org_id, session.session_id, "things.delete", requires_approval=True)
    assert logged.approval is not None
    engine.reviews.approve(org.org_id, logged.approval.approval_id, "lead")
    first = engine.recording.fail_action(org.org_id, logged.action.action_id, Failed(error="boom"))
    again = engine.recording.fail_action(org.org_id, logged.action.action_id, Failed(error="boom"))
    assert again == first
    statuses = [a.status for a in engine.recording.get_session(org.org_id, session.session_id).actions]
    assert statuses == [ActionStatus.CLEARED, ActionStatus.FAILED]


def test_approved_actions_never_confirmed_are_counted_after_an_hour(own_database_url: str, clock: Clock) -> None:
    engine = Engine(Store(own_database_url), clock=clock)
    org = engine.accounts.ensure_organisation(f"o-{uuid.uuid4().hex[:8]}")
    session = engine.recording.new_session(org.org_id, "agent")
    confirmed, forgotten = (log(engine, org.org_id, session.session_id, requires_approval=True) for _ in range(2))
    for logged in (confirmed, forgotten):
        assert logged.approval is not None
        engine.reviews.approve(org.org_id, logged.approval.approval_id, "lead")
    engine.recording.confirm_action(org.org_id, confirmed.action.action_id, Confirmed(response={}))
    clock.advance(minutes=59)
    assert engine.reviews.count_unconfirmed() == 0
    clock.advance(minutes=2)
    assert engine.reviews.count_unconfirmed() == 1


def test_an_embedded_engine_records_no_call_of_a_connector_that_is_not_installed(database_url: str) -> None:
    """A call of an unknown connector could be neither redacted by its rules nor undone: nothing is written."""
    engine = Engine(Store(database_url), connectors=installed_connectors())
    org = engine.accounts.ensure_organisation(f"t-{uuid.uuid4().hex[:8]}")
    session = engine.recording.new_session(org.org_id, "a", "i")
    with pytest.raises(UnknownConnectorError, match=r"installed: .*http"):
        engine.recording.log_action(
            org.org_id,
            session.session_id,
            WriteAhead(connector="nope", api_name="x", operation_type=OperationType.CREATE, payload={}),
        )
    assert engine.recording.get_session(org.org_id, session.session_id).actions == []
    engine.store.close()


@contextmanager
def statements(engine: Engine) -> Iterator[list[str]]:
    """The SQL statements the engine's store sends while the block runs."""
    sent: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        sent.append(statement)

    sa.event.listen(engine.store.engine, "before_cursor_execute", record)
    try:
        yield sent
    finally:
        sa.event.remove(engine.store.engine, "before_cursor_execute", record)


def awaiting_approval(engine: Engine, org_id: str, sessions: int) -> None:
    for _ in range(sessions):
        session = engine.recording.new_session(org_id, "agent", "intent")
        log(engine, org_id, session.session_id, "payouts.create", requires_approval=True)


@pytest.mark.parametrize("listing", ["sessions", "approvals"])
def test_a_list_is_read_in_as_many_queries_for_many_sessions_as_for_one(engine: Engine, listing: str) -> None:
    org = engine.accounts.ensure_organisation(f"o-{uuid.uuid4().hex[:8]}")

    def listed() -> list[Any]:
        if listing == "sessions":
            return list(engine.recording.list_sessions(org.org_id).sessions)
        return list(engine.reviews.list_approvals(org.org_id))

    awaiting_approval(engine, org.org_id, 1)
    with statements(engine) as one:
        listed()
    awaiting_approval(engine, org.org_id, 5)
    with statements(engine) as six:
        assert len(listed()) == 6
    assert len(six) == len(one)

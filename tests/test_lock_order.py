"""Two use cases that write the same rows, raced on PostgreSQL to the moment each holds its first row: they take
them in the store's one order (an approval, its action, the session, its rollback), so neither waits for the
other while holding what the other wants. Before, each of these pairs deadlocked ('deadlock detected', answered
503): a reviewer's decision lost, or a rollback's record of an undo that had run. Found by a lock-order audit."""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from test_engine import Clock, log, run_actions
from test_undo_handoffs import AgentsOnly

import agentrein_core.engine.consequences as consequences
import agentrein_core.engine.rollbacks as rollbacks
from agentrein_core.commands import Failed
from agentrein_core.engine import Engine
from agentrein_core.engine.maintenance import MaintenanceReport
from agentrein_core.errors import InvalidTransitionError, LeaseLostError
from agentrein_core.model import UNDO_NONE, Action, Approval, Organisation, Rollback, Session
from agentrein_core.statuses import (
    ActionStatus,
    ApprovalPurpose,
    ApprovalStatus,
    RollbackStatus,
    SessionStatus,
    UndoStatus,
)
from agentrein_core.store import Store
from agentrein_core.store.approvals import Approvals
from agentrein_core.store.rollbacks import Rollbacks
from agentrein_core.store.sessions import Actions, Sessions


class Meeting:
    """Two threads, each paused once where it holds its first rows until the other is paused too, or for 2 s (the
    other then waits for a row this one holds, which is what the test is after)."""

    def __init__(self) -> None:
        self.both_there = threading.Barrier(2)
        self.met: set[str] = set()

    def at(self, thread: str, original: Callable[..., Any], *, before: bool = False, then: float = 0.0) -> Any:
        """``original``, pausing the first time the thread named ``thread`` calls it (``before`` or after it
        runs), and ``then`` seconds more once the other thread is paused too."""

        def paused(*args: Any, **kwargs: Any) -> Any:
            first = threading.current_thread().name == thread and thread not in self.met
            if first and before:
                self._meet(thread, then)
            result = original(*args, **kwargs)
            if first and not before:
                self._meet(thread, then)
            return result

        return paused

    def _meet(self, thread: str, then: float) -> None:
        self.met.add(thread)
        with contextlib.suppress(threading.BrokenBarrierError):
            self.both_there.wait(2)
            time.sleep(then)


def race(**work: Callable[[], object]) -> list[BaseException]:
    """Run each piece of ``work`` in a thread named after it, at once; the errors they raised."""
    errors: list[BaseException] = []

    def run(piece: Callable[[], object]) -> None:
        try:
            piece()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(piece,), name=name) for name, piece in work.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return errors


def lost_race_at_most(errors: list[BaseException], losing: tuple[str, ...] = ("InvalidTransitionError",)) -> None:
    """Neither use case raised, or one lost the race with one of the ``losing`` errors: never an outage (a deadlock
    is answered as one)."""
    assert [type(e).__name__ for e in errors] in ([], *([name] for name in losing)), errors


class Undoes:
    """Runs inverses by counting them; says when one runs (its ``IN_PROGRESS`` mark is committed by then)."""

    hands_over = False

    def __init__(self) -> None:
        self.running = threading.Event()
        self.undone: list[str] = []

    def can_run(self, action: Action) -> bool:
        return True

    def run_undo(self, action: Action) -> None:
        self.undone.append(action.action_id)
        self.running.set()


def reviewed_call(engine: Engine, *, sandbox: bool = False) -> tuple[Organisation, Session, Action, Approval]:
    """A session of one call that ran, under review (as a ``REQUIRE_APPROVAL`` policy or a drift opens one)."""
    org = engine.accounts.ensure_organisation(f"o-{uuid.uuid4().hex[:8]}")
    session = engine.recording.new_session(org.org_id, "agent", "intent", sandbox=sandbox)
    (done,) = run_actions(engine, org.org_id, session.session_id, 1)
    now = engine.clock()
    review = consequences.new_approval(done, ApprovalPurpose.AFTER_EXECUTION, now, timedelta(hours=1))
    with engine.store.transaction() as tx:
        consequences.open_approval(tx, now, review)
    return org, session, done, review


def statuses(engine: Engine, session: Session) -> tuple[list[ActionStatus], list[ApprovalStatus]]:
    """The statuses of the session's actions and of its approvals, as read now."""
    view = engine.recording.get_session(session.org_id, session.session_id)
    return [a.status for a in view.actions], [p.status for p in view.approvals]


def operators_rollback(engine: Engine, session: Session) -> str:
    """An operator asks for the session's rollback: the id of the one that runs."""
    job = engine.rollbacks.request_rollback(
        session.org_id, session.session_id, caller_role="operator", requested_by="operator"
    )
    return job.rollback_id


@pytest.fixture
def engine(database_url: str) -> Engine:
    return Engine(Store(database_url), clock=Clock())


@pytest.fixture
def on_postgresql(postgres_url: str) -> Engine:
    return Engine(Store(postgres_url), clock=Clock())


def test_a_held_call_reported_failed_while_a_reviewer_rejects_it_ends_failed_once_without_a_deadlock(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The failure wrote the action, then closed its approval; the decision wrote the approval, then the action. A
    # published SDK reports FAILED as its wait times out, when the supervisor expires the approval.
    org = engine.accounts.ensure_organisation(f"o-{uuid.uuid4().hex[:8]}")
    session = engine.recording.new_session(org.org_id, "agent", "intent")
    held = log(engine, org.org_id, session.session_id, "payouts.create", requires_approval=True)
    assert held.approval is not None
    meeting = Meeting()
    monkeypatch.setattr(Sessions, "touch", meeting.at("failure", Sessions.touch))  # the action written
    monkeypatch.setattr(consequences, "emit", meeting.at("decision", consequences.emit))  # the approval written
    errors = race(
        failure=lambda: engine.recording.fail_action(org.org_id, held.action.action_id, Failed("timed out")),
        decision=lambda: engine.reviews.reject(org.org_id, held.approval.approval_id, "ada", "no"),
    )
    lost_race_at_most(errors)
    assert statuses(engine, session) == ([ActionStatus.FAILED], [ApprovalStatus.REJECTED])


def test_an_undo_recorded_while_a_reviewer_rejects_the_actions_review_is_run_once_and_the_review_closed(
    on_postgresql: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The rollback's step records the undo that ran (the action), then closes the action's review; the reviewer's
    # rejection writes the review, then the action (to undo it alone).
    engine = on_postgresql
    org, session, done, review = reviewed_call(engine)
    job = engine.rollbacks.request_rollback(org.org_id, session.session_id, caller_role="operator", requested_by="t")
    meeting = Meeting()
    monkeypatch.setattr(rollbacks, "close_reviews", meeting.at("rollback", rollbacks.close_reviews, before=True))
    monkeypatch.setattr(consequences, "emit", meeting.at("reviewer", consequences.emit))
    undoes = Undoes()
    errors = race(
        rollback=lambda: engine.rollbacks.run_rollback(org.org_id, job.rollback_id, undoes),
        # while the inverse runs (a call to the service): the likeliest moment
        reviewer=lambda: undoes.running.wait(10) and engine.reviews.reject(org.org_id, review.approval_id, "ada"),
    )
    lost_race_at_most(errors)
    assert statuses(engine, session) == ([ActionStatus.ROLLED_BACK], [ApprovalStatus.REJECTED])
    assert undoes.undone == [done.action_id]
    assert engine.rollbacks.get_rollback(org.org_id, job.rollback_id).status is RollbackStatus.SUCCEEDED


def test_a_rollback_requested_while_a_rejection_starts_one_is_that_one_rollback(
    on_postgresql: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The request held the session, then inserted its rollback; the rejection inserted its rollback (an entry in
    # the index of one rollback under way per session), then waited for the session: each for the other.
    engine = on_postgresql
    org = engine.accounts.ensure_organisation(f"o-{uuid.uuid4().hex[:8]}")
    session = engine.recording.new_session(org.org_id, "agent", "intent")
    run_actions(engine, org.org_id, session.session_id, 1)
    held = log(engine, org.org_id, session.session_id, "payouts.create", requires_approval=True)
    assert held.approval is not None
    meeting = Meeting()
    # the request holds the session while the rejection goes on to start its rollback
    monkeypatch.setattr(rollbacks, "read_session", meeting.at("request", rollbacks.read_session, then=0.5))
    monkeypatch.setattr(consequences, "emit", meeting.at("rejection", consequences.emit, before=True))
    requested: list[str] = []
    errors = race(
        request=lambda: requested.append(operators_rollback(engine, session)),
        rejection=lambda: engine.reviews.reject(org.org_id, held.approval.approval_id, "ada"),
    )
    assert errors == []
    view = engine.recording.get_session(org.org_id, session.session_id)
    assert [a.status for a in view.actions] == [ActionStatus.SUCCESS, ActionStatus.FAILED]
    with engine.store.transaction(write=False) as tx:
        started = tx.rollbacks.of_sessions([session.session_id])[session.session_id]
    assert [r.rollback_id for r in started] == requested  # one rollback, the one both started


def test_a_sandbox_rollback_requested_while_a_reviewer_rejects_a_review_in_it_rolls_the_session_back(
    on_postgresql: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A sandbox rollback is done in its request's transaction: it held the session, then flipped the action and
    # closed its review; the rejection wrote the review and the action, then wanted the session to undo it alone.
    engine = on_postgresql
    org, session, _, review = reviewed_call(engine, sandbox=True)
    meeting = Meeting()
    monkeypatch.setattr(rollbacks, "read_session", meeting.at("request", rollbacks.read_session))
    monkeypatch.setattr(consequences, "set_action", meeting.at("rejection", consequences.set_action))
    errors = race(
        request=lambda: operators_rollback(engine, session),
        rejection=lambda: engine.reviews.reject(org.org_id, review.approval_id, "ada"),
    )
    # whichever comes second finds the review closed or the action undone already: a lost race at most
    lost_race_at_most(errors)
    assert statuses(engine, session) == ([ActionStatus.ROLLED_BACK], [ApprovalStatus.REJECTED])


def test_a_sandbox_rollback_requested_while_a_reviewer_rejects_a_newer_request_in_it_rolls_the_session_back(
    on_postgresql: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by a second reading: the request held the older review, then waited for the newer request; the
    # rejection held that request, its action and the session, then its sandbox rollback closed the older review.
    engine = on_postgresql
    org, session, _, _ = reviewed_call(engine, sandbox=True)
    clock = engine.clock
    assert isinstance(clock, Clock)
    clock.advance(seconds=1)  # the request comes after the review
    held = log(engine, org.org_id, session.session_id, "payouts.create", requires_approval=True)
    assert held.approval is not None
    meeting = Meeting()
    holds = meeting.at("request", rollbacks.hold_before_rollback, before=True)  # before it holds anything
    monkeypatch.setattr(rollbacks, "hold_before_rollback", holds)
    monkeypatch.setattr(consequences, "emit", meeting.at("rejection", consequences.emit, then=0.5))
    errors = race(
        request=lambda: operators_rollback(engine, session),
        rejection=lambda: engine.reviews.reject(org.org_id, held.approval.approval_id, "ada"),
    )
    # the second finds the request decided, or the session rolled back by the rejection: a lost race at most
    lost_race_at_most(errors, ("InvalidTransitionError", "RollbackRefusedError"))
    actions, approvals = statuses(engine, session)
    assert actions[0] is ActionStatus.ROLLED_BACK and ApprovalStatus.PENDING not in approvals


def test_a_failure_that_rolls_a_sandbox_session_back_while_a_reviewer_rejects_a_review_in_it_ends_once(
    on_postgresql: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The failure wrote its action and the session, then its sandbox rollback flipped the other action and closed
    # its review; the rejection held that review and the session's actions, in order, and waited for the failed one.
    engine = on_postgresql
    org, session, _, review = reviewed_call(engine, sandbox=True)
    failing = log(engine, org.org_id, session.session_id, "payouts.create")
    meeting = Meeting()
    monkeypatch.setattr(Sessions, "touch", meeting.at("failure", Sessions.touch))
    monkeypatch.setattr(Approvals, "hold_pending_in", meeting.at("rejection", Approvals.hold_pending_in))
    errors = race(
        failure=lambda: engine.recording.fail_action(org.org_id, failing.action.action_id, Failed("timed out")),
        rejection=lambda: engine.reviews.reject(org.org_id, review.approval_id, "ada"),
    )
    lost_race_at_most(errors)
    actions, approvals = statuses(engine, session)
    assert actions == [ActionStatus.ROLLED_BACK, ActionStatus.FAILED] and approvals == [ApprovalStatus.REJECTED]


def test_a_rollback_requested_while_a_one_action_rollback_hands_its_undo_to_the_agent_widens_it(
    on_postgresql: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The request held the session (FOR UPDATE), then widened the rollback under way; the rollback's step held its
    # job, then offered the undo, a row whose foreign key waited for the session's lock.
    engine = on_postgresql
    org, session, done, review = reviewed_call(engine)
    engine.reviews.reject(org.org_id, review.approval_id, "ada")  # undoes that one action alone
    alone = engine.rollbacks.latest_rollback(org.org_id, session.session_id)
    assert alone is not None and not alone.whole_session
    meeting = Meeting()
    monkeypatch.setattr(rollbacks, "session_of", meeting.at("request", rollbacks.session_of))
    monkeypatch.setattr(Rollbacks, "offer", meeting.at("step", Rollbacks.offer, before=True))
    widened: list[str] = []
    errors = race(
        request=lambda: widened.append(operators_rollback(engine, session)),
        step=lambda: engine.rollbacks.run_rollback(org.org_id, alone.rollback_id, AgentsOnly()),
    )
    assert errors == []
    assert widened == [alone.rollback_id]
    job = engine.rollbacks.get_rollback(org.org_id, alone.rollback_id)
    assert job.whole_session and job.status is RollbackStatus.RUNNING
    assert engine.rollbacks.handoff_of(org.org_id, job, done.action_id) is not None  # offered to the agent
    assert engine.recording.get_session(org.org_id, session.session_id).status is SessionStatus.ACTIVE


def test_a_rollback_ending_while_a_reviewer_rejects_the_review_of_an_action_it_skipped_ends_once(
    on_postgresql: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The step skipped an action (writing its job), then set the session's status; the reviewer's rejection of that
    # action's review held the session, then started a rollback, which waited on the job.
    engine = on_postgresql
    org = engine.accounts.ensure_organisation(f"o-{uuid.uuid4().hex[:8]}")
    session = engine.recording.new_session(org.org_id, "agent", "intent")
    run_actions(engine, org.org_id, session.session_id, 1, undo=UNDO_NONE)  # skipped in the last step
    run_actions(engine, org.org_id, session.session_id, 1)  # undone: ends the first step
    (skipped,) = run_actions(engine, org.org_id, session.session_id, 1, undo=UNDO_NONE)  # skipped in the first
    now = engine.clock()
    review = consequences.new_approval(skipped, ApprovalPurpose.AFTER_EXECUTION, now, timedelta(hours=1))
    with engine.store.transaction() as tx:
        consequences.open_approval(tx, now, review)
    job = engine.rollbacks.request_rollback(org.org_id, session.session_id, caller_role="operator", requested_by="o")
    meeting = Meeting()
    monkeypatch.setattr(rollbacks, "set_session_status", meeting.at("step", rollbacks.set_session_status, before=True))
    monkeypatch.setattr(Rollbacks, "insert", meeting.at("reviewer", Rollbacks.insert, before=True))
    undoes = Undoes()
    errors = race(
        step=lambda: engine.rollbacks.run_rollback(org.org_id, job.rollback_id, undoes),
        reviewer=lambda: undoes.running.wait(10) and engine.reviews.reject(org.org_id, review.approval_id, "ada"),
    )
    assert errors == []
    assert engine.rollbacks.get_rollback(org.org_id, job.rollback_id).status is RollbackStatus.SUCCEEDED
    assert len(undoes.undone) == 1


def test_an_undo_starting_while_a_reviewer_rejects_the_review_of_its_action_runs_once(
    on_postgresql: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The step renewed its job, then marked the action's undo under way; the reviewer held the review, the action
    # and the session, then started a rollback, which waited on the job.
    engine = on_postgresql
    org, session, done, review = reviewed_call(engine)
    job = engine.rollbacks.request_rollback(org.org_id, session.session_id, caller_role="operator", requested_by="o")
    meeting = Meeting()
    marking = rollbacks.Rollbacks._in_progress
    monkeypatch.setattr(rollbacks.Rollbacks, "_in_progress", meeting.at("step", marking, before=True))
    monkeypatch.setattr(Rollbacks, "insert", meeting.at("reviewer", Rollbacks.insert, before=True))
    undoes = Undoes()
    errors = race(
        step=lambda: engine.rollbacks.run_rollback(org.org_id, job.rollback_id, undoes),
        reviewer=lambda: engine.reviews.reject(org.org_id, review.approval_id, "ada"),
    )
    assert errors == []
    assert undoes.undone == [done.action_id]
    assert statuses(engine, session) == ([ActionStatus.ROLLED_BACK], [ApprovalStatus.REJECTED])


def test_a_one_action_rollback_widened_to_the_session_as_it_ends_undoes_the_session(
    on_postgresql: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The step had read its job before an operator's request widened it; it ended the job as it had read it, and
    # the operator's rollback, answered with that job, undid nothing more.
    engine = on_postgresql
    org, session, done, review = reviewed_call(engine)
    (other,) = run_actions(engine, org.org_id, session.session_id, 1)
    engine.reviews.reject(org.org_id, review.approval_id, "ada")  # undoes that one action alone
    alone = engine.rollbacks.latest_rollback(org.org_id, session.session_id)
    assert alone is not None and not alone.whole_session
    at_its_end, widened = threading.Event(), threading.Event()
    next_to_undo = Actions.next_to_undo

    def pausing(self: Actions, session_id: str, only_requested: bool) -> list[Action]:
        head = next_to_undo(self, session_id, only_requested)
        if not head and threading.current_thread().name == "step" and not at_its_end.is_set():
            at_its_end.set()
            widened.wait(10)
        return head

    monkeypatch.setattr(Actions, "next_to_undo", pausing)
    undoes = Undoes()

    def operator() -> None:
        assert at_its_end.wait(10)
        assert operators_rollback(engine, session) == alone.rollback_id  # the one under way, widened
        widened.set()

    errors = race(step=lambda: engine.rollbacks.run_rollback(org.org_id, alone.rollback_id, undoes), operator=operator)
    assert errors == []
    job = engine.rollbacks.get_rollback(org.org_id, alone.rollback_id)
    assert (job.whole_session, job.status) == (True, RollbackStatus.SUCCEEDED)
    assert undoes.undone == [done.action_id, other.action_id]  # the other undone too, by the job it was told of


@pytest.mark.parametrize("group_waits_first", [True, False], ids=["the group waits first", "the decision waits first"])
def test_a_reviewer_rejecting_a_held_call_reported_failed_in_a_group_commit_is_answered(
    on_postgresql: Engine, monkeypatch: pytest.MonkeyPatch, group_waits_first: bool
) -> None:
    # A group commit holds the session for a record before it (a call's write-ahead record), then wants the held
    # call's approval to record its failure; the reviewer holds the approval and the call, then wants the session.
    engine = on_postgresql
    org = engine.accounts.ensure_organisation(f"o-{uuid.uuid4().hex[:8]}")
    session = engine.recording.new_session(org.org_id, "agent", "intent")
    run_actions(engine, org.org_id, session.session_id, 1)  # something to undo
    held = log(engine, org.org_id, session.session_id, "payouts.create", requires_approval=True)
    assert held.approval is not None
    meeting = Meeting()
    first, then = (0.3, 0.0) if group_waits_first else (0.0, 0.3)
    monkeypatch.setattr(Sessions, "take_seq", meeting.at("agentrein-writer", Sessions.take_seq, then=first))
    monkeypatch.setattr(Sessions, "hold", meeting.at("decision", Sessions.hold, before=True, then=then))
    group, gate = engine.store.group_commit, threading.Event()
    ahead = group.submit(lambda: gate.wait(10))  # the writer takes this alone; the next two make one group
    time.sleep(0.2)
    recorded = group.submit(lambda: log(engine, org.org_id, session.session_id, "things.create#late"))
    failed = group.submit(lambda: engine.recording.fail_action(org.org_id, held.action.action_id, Failed("timeout")))
    gate.set()
    ahead.result(10)
    errors = race(decision=lambda: engine.reviews.reject(org.org_id, held.approval.approval_id, "ada", "no"))
    assert errors == []  # never a 503 for the reviewer
    assert recorded.result(30).action.status is ActionStatus.CLEARED
    with contextlib.suppress(InvalidTransitionError):  # the reviewer was first: the failure came after it
        failed.result(30)
    assert statuses(engine, session) == (
        [ActionStatus.SUCCESS, ActionStatus.FAILED, ActionStatus.CLEARED],
        [ApprovalStatus.REJECTED],
    )


class Nowhere:
    """A process that can neither run an undo nor hand it to the agent's."""

    hands_over = False

    def can_run(self, action: Action) -> bool:
        return False

    def run_undo(self, action: Action) -> None:
        raise AssertionError("never run here")


def test_a_rollback_step_whose_lease_another_worker_took_meanwhile_writes_nothing(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The step reads its job unlocked first and writes it last: what it wrote in between stands only if it still
    # holds the job then (found by a second reading, helper 54).
    engine = Engine(Store(postgres_url), clock=Clock())
    org = engine.accounts.ensure_organisation(f"o-{uuid.uuid4().hex[:8]}")
    session = engine.recording.new_session(org.org_id, "agent", "intent")
    run_actions(engine, org.org_id, session.session_id, 1)  # to undo: this process cannot
    (skipped,) = run_actions(engine, org.org_id, session.session_id, 1, undo=UNDO_NONE)  # skipped first
    job = engine.rollbacks.request_rollback(org.org_id, session.session_id, caller_role="operator", requested_by="o")
    other = sa.create_engine(postgres_url)
    jobs = sa.table("rollbacks", sa.column("rollback_id"), sa.column("lease_token"))
    still_held = rollbacks.Rollbacks._still_held

    def taken_over_after(self: rollbacks.Rollbacks, tx: Any, job: Rollback, token: str) -> Rollback:
        stored = still_held(self, tx, job, token)
        with other.begin() as conn:  # another worker claims it (this one's lease ran out meanwhile)
            conn.execute(jobs.update().where(jobs.c.rollback_id == job.rollback_id).values(lease_token="other"))
        return stored

    monkeypatch.setattr(rollbacks.Rollbacks, "_still_held", taken_over_after)
    with pytest.raises(LeaseLostError):
        engine.rollbacks.run_rollback(org.org_id, job.rollback_id, Nowhere())
    other.dispose()
    undone = {a.action_id: a.undo_status for a in engine.recording.get_session(org.org_id, session.session_id).actions}
    assert undone[skipped.action_id] is UndoStatus.NONE  # not SKIPPED by a worker that no longer held the job
    engine.store.close()


def test_an_expiry_that_loses_a_deadlock_is_left_to_the_next_round_and_the_others_expire_meanwhile(
    postgres_url: str,
) -> None:
    clock = Clock()
    engine = Engine(Store(postgres_url), clock=clock)
    org = engine.accounts.ensure_organisation(f"o-{uuid.uuid4().hex[:8]}")
    held = []
    for minutes in (1, 2):  # the first expires first
        session = engine.recording.new_session(org.org_id, "agent", "intent")
        logged = log(
            engine, org.org_id, session.session_id, requires_approval=True, approval_timeout=timedelta(minutes=minutes)
        )
        assert logged.approval is not None
        held.append(logged)
    clock.advance(minutes=3)
    first = held[0]
    assert first.approval is not None
    other = sa.create_engine(postgres_url)
    actions = sa.table("actions", sa.column("action_id"), sa.column("error"))
    approvals = sa.table("approvals", sa.column("approval_id"), sa.column("reason"))
    reports: list[MaintenanceReport] = []
    with other.connect() as holder, other.connect() as watcher, holder.begin():
        holder.execute(actions.update().where(actions.c.action_id == first.action.action_id).values(error="x"))
        round_ = threading.Thread(target=lambda: reports.append(engine.maintenance.maintain()))
        round_.start()
        # The round holds the first approval and waits for its action: now take them the other way round.
        waiting = sa.text(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
        )
        deadline = time.monotonic() + 10
        while not watcher.execute(waiting).scalar() and time.monotonic() < deadline:
            time.sleep(0.01)
        holder.execute(
            approvals.update().where(approvals.c.approval_id == first.approval.approval_id).values(reason="x")
        )
        round_.join(timeout=30)
    other.dispose()
    assert reports == [MaintenanceReport(expired_approvals=1, abandoned_sessions=0)]  # the round went on
    statuses = [engine.reviews.get_approval(org.org_id, h.approval.approval_id).status for h in held if h.approval]
    assert statuses == [ApprovalStatus.PENDING, ApprovalStatus.EXPIRED]
    assert engine.maintenance.maintain().expired_approvals == 1  # the next round
    engine.store.close()

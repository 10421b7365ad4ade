"""What a decision does, as the pure functions of ``agentrein_core.decisions`` answer it over records: before
a decision, per purpose, what approving and rejecting would each do; after it, what it did. The words of each
action are given here (the connectors' own words are tested with each connector)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from attrs import evolve

from agentrein_core import decisions, rollback, wording
from agentrein_core.connector import Undoable, UndoOutlook
from agentrein_core.decisions import ActionWords, Describe, Fate, StepAhead, tallied
from agentrein_core.engine.reviews import explain
from agentrein_core.model import Action, Approval, Rollback, Session, UndoConfig
from agentrein_core.read_models import ApprovalInfo, Consequences, UndoStep, approval_info, queue_order
from agentrein_core.rules import stopped_waiting
from agentrein_core.statuses import (
    ActionStatus,
    ApprovalPurpose,
    ApprovalStatus,
    OperationType,
    RollbackStatus,
    SessionStatus,
    UndoStatus,
)

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
SESSION = Session("ses_1", "org", "billing-agent", "Refund order 7", False, SessionStatus.ACTIVE, NOW, NOW)
DELETE_THING = UndoConfig("http-delete", {"url": "https://api.example.com/v1/things/thi_1"})


def action(
    seq: int, status: ActionStatus = ActionStatus.SUCCESS, undo: UndoConfig | None = DELETE_THING, **more: object
) -> Action:
    made = Action(
        action_id=f"act_{seq}",
        session_id="ses_1",
        org_id="org",
        seq=seq,
        connector="http",
        api_name=f"POST /v1/things#{seq}",
        operation_type=OperationType.CREATE,
        payload={},
        status=status,
        idempotency_key=f"key-{seq}",
        created_at=NOW,
        updated_at=NOW,
        undo=undo,
    )
    return evolve(made, **more)  # type: ignore[arg-type]


def approval(purpose: ApprovalPurpose, of: Action, **more: object) -> Approval:
    asked = Approval(
        "apr_1", "org", "ses_1", of.action_id, purpose, ApprovalStatus.PENDING, NOW, NOW + timedelta(minutes=5)
    )
    return evolve(asked, **more)  # type: ignore[arg-type]


def rollback_job(status: RollbackStatus, **more: object) -> Rollback:
    job = Rollback("rbk_1", "org", "ses_1", status, "before-execution approval rejected", "lead@example.com", NOW)
    return evolve(job, **more)  # type: ignore[arg-type]


CREATES = UndoOutlook(Undoable.YES, "Delete the thing it creates")


def words(forecast: UndoOutlook = CREATES) -> Describe:
    """Words as a connector gives them: ``#seq`` for what an action does; its recorded undo, else ``forecast``."""

    def said(a: Action) -> ActionWords:
        if a.undo is None:
            undo = forecast
        elif a.undo.is_none:
            undo = UndoOutlook(Undoable.NO, f"#{a.seq} has no inverse")
        else:
            undo = UndoOutlook(Undoable.YES, f"undo of #{a.seq}")
        return ActionWords(f"action #{a.seq}", "api.example.com", undo)

    return said


def foresee(
    approval: Approval,
    action: Action,
    session: Session,
    actions: list[Action],
    rollbacks: list[Rollback],
    said: Describe,
) -> Consequences:
    """What approving and rejecting would each do, in words: the decision's data, as wording says it."""
    return wording.consequences(decisions.foresee(approval, action, session, tallied(actions), rollbacks, said), said)


def outcome(
    approval: Approval, action: Action, actions: list[Action], rollbacks: list[Rollback], said: Describe
) -> str | None:
    """What a decision did, in words."""
    return wording.outcome(decisions.outcome(approval, action, tallied(actions), rollbacks), said)


# before execution ------------------------------------------------------------------------------------
def test_rejecting_a_held_call_rolls_the_session_back_listing_each_undo_last_done_first() -> None:
    held = action(4, ActionStatus.PENDING_APPROVAL, undo=None)
    done = [action(1), action(2, undo=UndoConfig("none")), action(3), held]
    reject = foresee(approval(ApprovalPurpose.BEFORE_EXECUTION, held), held, SESSION, done, [], words()).reject
    assert reject.summary == (
        "The agent's call does not run (the agent is told it was rejected), and the session is rolled back: "
        "2 actions are undone, last done first; 1 action with no inverse stays as it is:"
    )
    assert reject.steps == [
        UndoStep("act_3", 3, "action #3", "undo of #3"),
        UndoStep("act_2", 2, "action #2", None, "#2 has no inverse"),
        UndoStep("act_1", 1, "action #1", "undo of #1"),
    ]
    assert reject.irreversible  # what has no inverse stays


def test_rejecting_a_held_call_after_a_thousand_calls_lists_the_first_twenty_undos_and_counts_the_rest() -> None:
    held = action(1001, ActionStatus.PENDING_APPROVAL, undo=None)
    done = [*(action(n) for n in range(1, 1001)), held]
    reject = foresee(approval(ApprovalPurpose.BEFORE_EXECUTION, held), held, SESSION, done, [], words()).reject
    assert "1000 actions are undone, last done first" in reject.summary
    assert [step.seq for step in reject.steps] == list(range(1000, 980, -1))
    assert reject.more_steps == 980 and wording.more_undos(reject.more_steps) == "and 980 more undos"


def test_a_rollback_of_twenty_steps_lists_them_all_and_counts_none_more() -> None:
    held = action(21, ActionStatus.PENDING_APPROVAL, undo=None)
    done = [*(action(n) for n in range(1, 21)), held]
    reject = foresee(approval(ApprovalPurpose.BEFORE_EXECUTION, held), held, SESSION, done, [], words()).reject
    assert len(reject.steps) == 20 and reject.more_steps == 0


def test_a_foreseen_rejection_names_as_data_each_action_it_undoes_and_each_that_stays_without_an_inverse() -> None:
    held = action(4, ActionStatus.PENDING_APPROVAL, undo=None)
    guarded = action(3, undo=evolve(DELETE_THING, require_approval=True))
    done = [action(1), action(2, undo=UndoConfig("none")), guarded, held]
    reject = decisions.foresee(
        approval(ApprovalPurpose.BEFORE_EXECUTION, held), held, SESSION, tallied(done), [], words()
    ).reject
    assert reject == decisions.CallRefused(
        decisions.AfterRefusal.ROLLED_BACK,
        decisions.StepsAhead(
            [
                StepAhead(guarded, Fate.UNDONE, waits_for_approval=True),
                StepAhead(done[1], Fate.STAYS),
                StepAhead(done[0], Fate.UNDONE),
            ],
            count=3,
            staying=1,
        ),
    )
    assert reject.irreversible


def test_rejecting_a_held_call_with_nothing_done_before_it_undoes_nothing() -> None:
    held = action(1, ActionStatus.PENDING_APPROVAL, undo=None)
    reject = foresee(approval(ApprovalPurpose.BEFORE_EXECUTION, held), held, SESSION, [held], [], words()).reject
    assert reject.steps == []
    assert "nothing is undone; the session is marked FAILED" in reject.summary


def test_approving_a_call_its_connector_cannot_undo_warns_that_it_cannot_be_undone() -> None:
    held = action(1, ActionStatus.PENDING_APPROVAL, undo=None)
    no_inverse = words(UndoOutlook(Undoable.NO, "money that left cannot be called back"))
    approve = foresee(approval(ApprovalPurpose.BEFORE_EXECUTION, held), held, SESSION, [held], [], no_inverse).approve
    assert approve.summary == "The agent's call runs, and it cannot be undone: money that left cannot be called back."
    assert approve.irreversible


def test_approving_a_call_whose_undo_only_the_agents_code_can_give_says_it_is_known_once_it_ran() -> None:
    held = action(1, ActionStatus.PENDING_APPROVAL, undo=None)
    unknown = words(UndoOutlook(Undoable.UNKNOWN, "only an undo the agent's code gives"))
    approve = foresee(approval(ApprovalPurpose.BEFORE_EXECUTION, held), held, SESSION, [held], [], unknown).approve
    assert (
        "Whether it can be undone is known only once it has run: only an undo the agent's code gives" in approve.summary
    )
    assert not approve.irreversible


def test_rejecting_a_held_call_in_a_sandbox_session_marks_the_others_undone_without_inverses() -> None:
    held = action(3, ActionStatus.PENDING_APPROVAL, undo=None)
    other_held = action(2, ActionStatus.PENDING_APPROVAL, undo=None)
    done = [action(1), other_held, held]
    sandbox = evolve(SESSION, sandbox=True)
    decided = foresee(approval(ApprovalPurpose.BEFORE_EXECUTION, held), held, sandbox, done, [], words())
    assert [(s.seq, s.undo) for s in decided.reject.steps] == [
        (2, "marked undone; no inverse runs (sandbox)"),
        (1, "marked undone; no inverse runs (sandbox)"),
    ]
    assert "sandbox session" in decided.approve.summary


def test_rejecting_a_held_call_while_a_rollback_runs_starts_no_other() -> None:
    held = action(2, ActionStatus.PENDING_APPROVAL, undo=None)
    running = [rollback_job(RollbackStatus.RUNNING)]
    reject = foresee(
        approval(ApprovalPurpose.BEFORE_EXECUTION, held), held, SESSION, [action(1), held], running, words()
    ).reject
    assert reject.summary.endswith("a rollback of the session is already under way.")
    assert reject.steps == []


# after execution -------------------------------------------------------------------------------------
def test_rejecting_a_review_undoes_that_one_action_by_its_inverse() -> None:
    reviewed = action(2)
    decided = foresee(
        approval(ApprovalPurpose.AFTER_EXECUTION, reviewed), reviewed, SESSION, [action(1), reviewed], [], words()
    )
    assert decided.reject.summary == "This one action is undone: undo of #2."
    assert decided.reject.steps == [UndoStep("act_2", 2, "action #2", "undo of #2")]
    assert (
        decided.approve.summary == "The action stays done; a rollback of the session would still undo it: undo of #2."
    )


def test_rejecting_a_review_of_an_action_with_no_undo_says_it_stays_as_it_is() -> None:
    reviewed = action(1, undo=UndoConfig("none"))
    decided = foresee(approval(ApprovalPurpose.AFTER_EXECUTION, reviewed), reviewed, SESSION, [reviewed], [], words())
    assert decided.reject.summary == (
        "This one action cannot be undone (#1 has no inverse): it stays as it is; your rejection is recorded."
    )
    assert decided.reject.irreversible and decided.approve.irreversible


def test_rejecting_a_review_whose_undo_needs_approval_says_it_waits_for_a_reviewer() -> None:
    reviewed = action(1, undo=evolve(DELETE_THING, require_approval=True))
    reject = foresee(
        approval(ApprovalPurpose.AFTER_EXECUTION, reviewed), reviewed, SESSION, [reviewed], [], words()
    ).reject
    assert reject.summary == "This one action is undone: undo of #1. Its undo first waits for a reviewer's approval."
    assert reject.steps[0].waits_for_approval


# rollback -------------------------------------------------------------------------------------------
def test_approving_an_undo_runs_it_and_the_rollback_goes_on_to_the_rest() -> None:
    guarded = action(3, undo=evolve(DELETE_THING, require_approval=True), undo_status=UndoStatus.AWAITING_APPROVAL)
    done = [action(1), action(2), guarded]
    asked = approval(ApprovalPurpose.ROLLBACK, guarded, rollback_id="rbk_1")
    job = rollback_job(RollbackStatus.WAITING_APPROVAL)
    approve = foresee(asked, guarded, SESSION, done, [job], words()).approve
    assert approve.summary == (
        "The undo runs (undo of #3) and the rollback goes on; then 2 actions are still to undo, last done first."
    )
    assert [(s.seq, s.undo, s.waits_for_approval) for s in approve.steps] == [
        (3, "undo of #3", False),
        (2, "undo of #2", False),
        (1, "undo of #1", False),
    ]


def test_rejecting_an_undo_stops_the_rollback_and_the_action_stays_done() -> None:
    guarded = action(2, undo=evolve(DELETE_THING, require_approval=True), undo_status=UndoStatus.AWAITING_APPROVAL)
    asked = approval(ApprovalPurpose.ROLLBACK, guarded, rollback_id="rbk_1")
    job = rollback_job(RollbackStatus.WAITING_APPROVAL)
    reject = foresee(asked, guarded, SESSION, [action(1), guarded], [job], words()).reject
    assert reject.summary == (
        "The rollback stops here: the session is marked FAILED and this action stays done (action #2); "
        "the 1 action left to undo stays as well."
    )
    assert reject.steps == [UndoStep("act_1", 1, "action #1", None, "the rollback stops before it")]


# once decided -----------------------------------------------------------------------------------------
def test_an_approved_call_its_agent_waited_for_says_the_agent_was_told_then_that_the_call_ran() -> None:
    cleared = action(1, ActionStatus.CLEARED, undo=None)
    asked = approval(ApprovalPurpose.BEFORE_EXECUTION, cleared, waited_until=NOW + timedelta(minutes=3, seconds=20))
    decided = evolve(asked, status=ApprovalStatus.APPROVED, resolved_at=NOW + timedelta(minutes=3))  # long-poll open
    assert outcome(decided, cleared, [cleared], [], words()) == (
        "Approved: the agent was told; its call is not confirmed as run yet."
    )
    ran = evolve(cleared, status=ActionStatus.SUCCESS)
    assert outcome(decided, ran, [ran], [], words()) == "Approved: the agent's call ran."


def test_an_approved_call_whose_agent_had_stopped_waiting_never_says_the_agent_resumed() -> None:
    cleared = action(1, ActionStatus.CLEARED, undo=None)
    asked = approval(ApprovalPurpose.BEFORE_EXECUTION, cleared, waited_until=NOW + timedelta(seconds=30))
    decided = evolve(asked, status=ApprovalStatus.APPROVED, resolved_at=NOW + timedelta(minutes=3))
    assert outcome(decided, cleared, [cleared], [], words()) == (
        "Approved: the agent had stopped waiting (2026-01-01 12:00 UTC), so its call has not run."
    )


def test_an_agent_waits_while_its_long_poll_is_open_and_moments_after_and_has_stopped_waiting_then() -> None:
    asked = approval(ApprovalPurpose.BEFORE_EXECUTION, action(1, ActionStatus.PENDING_APPROVAL))
    assert stopped_waiting(asked, NOW + timedelta(seconds=5)) is None  # its first long-poll is about to start
    assert stopped_waiting(asked, NOW + timedelta(seconds=6)) == NOW  # it never started one
    polling = evolve(asked, waited_until=NOW + timedelta(seconds=30))
    assert stopped_waiting(polling, NOW + timedelta(seconds=20)) is None  # open
    assert stopped_waiting(polling, NOW + timedelta(seconds=35)) is None  # ended moments ago: the next one starts
    assert stopped_waiting(polling, NOW + timedelta(seconds=36)) == NOW + timedelta(seconds=30)
    undo = approval(ApprovalPurpose.ROLLBACK, action(1), rollback_id="rbk_1")
    assert stopped_waiting(undo, NOW + timedelta(hours=1)) is None  # no agent waits for an undo's approval


def test_a_rejected_call_counts_what_the_rollback_it_started_undid() -> None:
    refused = action(4, ActionStatus.FAILED, undo=None)
    done = [
        action(1, ActionStatus.ROLLED_BACK, undo_status=UndoStatus.DONE),
        action(2, undo=UndoConfig("none"), undo_status=UndoStatus.SKIPPED),
        action(3, ActionStatus.ROLLED_BACK, undo_status=UndoStatus.DONE),
        refused,
    ]
    decided = approval(ApprovalPurpose.BEFORE_EXECUTION, refused, status=ApprovalStatus.REJECTED, resolved_at=NOW)
    finished = [rollback_job(RollbackStatus.SUCCEEDED, finished_at=NOW + timedelta(seconds=1))]
    assert outcome(decided, refused, done, finished, words()) == (
        "Rejected: the agent's call did not run; "
        "the session was rolled back (2 undone, 1 with no inverse left as it was)."
    )
    running = [rollback_job(RollbackStatus.RUNNING)]
    assert "the session is being rolled back (2 of 3 undone so far)" in str(
        outcome(decided, refused, done, running, words())
    )


def test_an_approved_review_whose_action_a_rollback_later_undid_names_that_rollback() -> None:
    undone = action(1, ActionStatus.ROLLED_BACK, undo_status=UndoStatus.DONE, updated_at=NOW + timedelta(minutes=2))
    decided = approval(ApprovalPurpose.AFTER_EXECUTION, undone, status=ApprovalStatus.APPROVED, resolved_at=NOW)
    job = rollback_job(RollbackStatus.SUCCEEDED, created_at=NOW + timedelta(minutes=1))
    assert outcome(decided, undone, [undone], [job], words()) == (
        "Approved, then undone by the rollback of 2026-01-01 12:01 UTC "
        "(before-execution approval rejected, requested by lead@example.com)."
    )


def test_an_outcome_names_as_data_the_rollback_that_undid_an_approved_call_the_latest_started_before() -> None:
    undone = action(1, ActionStatus.ROLLED_BACK, undo_status=UndoStatus.DONE, updated_at=NOW + timedelta(minutes=2))
    decided = approval(ApprovalPurpose.BEFORE_EXECUTION, undone, status=ApprovalStatus.APPROVED, resolved_at=NOW)
    earlier = rollback_job(RollbackStatus.SUCCEEDED, rollback_id="rbk_0", created_at=NOW - timedelta(hours=1))
    job = rollback_job(RollbackStatus.SUCCEEDED, created_at=NOW + timedelta(minutes=1))
    later = rollback_job(RollbackStatus.RUNNING, rollback_id="rbk_2", created_at=NOW + timedelta(minutes=5))
    assert decisions.outcome(decided, undone, tallied([undone]), [earlier, job, later]) == decisions.CallAllowed(
        ApprovalStatus.APPROVED, undone, undone_by=job
    )


def test_a_rejected_review_says_its_action_was_undone_or_stays() -> None:
    undone = action(1, ActionStatus.ROLLED_BACK, undo_status=UndoStatus.DONE, undo_requested=True)
    decided = approval(ApprovalPurpose.AFTER_EXECUTION, undone, status=ApprovalStatus.REJECTED, resolved_at=NOW)
    assert outcome(decided, undone, [undone], [], words()) == "Rejected: the action was undone (undo of #1)."
    kept = action(1, undo=UndoConfig("none"), undo_status=UndoStatus.SKIPPED, undo_requested=True)
    assert outcome(decided, kept, [kept], [], words()) == (
        "Rejected: the action has no undo, so it stays as it is (#1 has no inverse)."
    )


def test_a_pending_request_has_no_outcome_and_a_decided_one_no_consequences() -> None:
    held = action(1, ActionStatus.PENDING_APPROVAL, undo=None)
    pending = approval(ApprovalPurpose.BEFORE_EXECUTION, held)
    shown = approval_info(pending, held, SESSION, NOW, explain(pending, held, SESSION, tallied([held]), [], words()))
    assert shown.outcome is None and shown.consequences is not None
    assert (shown.description, shown.target_host) == ("action #1", "api.example.com")
    decided = evolve(pending, status=ApprovalStatus.APPROVED, resolved_at=NOW)
    cleared = evolve(held, status=ActionStatus.CLEARED)
    shown = approval_info(
        decided, cleared, SESSION, NOW, explain(decided, cleared, SESSION, tallied([held]), [], words())
    )
    assert shown.consequences is None and shown.outcome is not None


# the queue ------------------------------------------------------------------------------------------
def test_the_queue_puts_the_requests_someone_waits_for_first_least_time_left_first() -> None:
    def pending(
        approval_id: str, purpose: ApprovalPurpose, minutes_left: int, requested_minutes_ago: int
    ) -> ApprovalInfo:
        held = action(1, ActionStatus.PENDING_APPROVAL, undo=None)
        asked = evolve(
            approval(purpose, held),
            approval_id=approval_id,
            requested_at=NOW - timedelta(minutes=requested_minutes_ago),
            timeout_at=NOW + timedelta(minutes=minutes_left),
        )
        return approval_info(asked, held, SESSION, NOW)

    review = pending("apr_review", ApprovalPurpose.AFTER_EXECUTION, 60 * 24, 90)  # the oldest
    waiting_long = pending("apr_long", ApprovalPurpose.BEFORE_EXECUTION, 30, 1)
    undo = pending("apr_undo", ApprovalPurpose.ROLLBACK, 60, 2)
    waiting_short = pending("apr_short", ApprovalPurpose.BEFORE_EXECUTION, 4, 3)
    ordered = queue_order([review, waiting_long, undo, waiting_short])
    assert [p.approval_id for p in ordered] == ["apr_short", "apr_long", "apr_undo", "apr_review"]
    assert [p.blocking for p in ordered] == [True, True, True, False]


def test_a_decision_said_not_to_read_its_session_says_the_same_without_the_sessions_actions() -> None:
    """The approvals page reads the actions of a session only for the approvals whose words depend on them
    (``picks_read``): for the others, the words with no actions are the words with every action."""
    others = [action(1), action(2, undo=UndoConfig("none")), action(3, ActionStatus.ROLLED_BACK)]
    ran = action(4)
    held = action(4, ActionStatus.PENDING_APPROVAL, undo=None)
    undone_later = action(4, ActionStatus.ROLLED_BACK, undo_status=UndoStatus.DONE)
    decided = {"resolved_at": NOW, "resolved_by": "lead@example.com"}
    rollbacks = [rollback_job(RollbackStatus.SUCCEEDED, finished_at=NOW)]
    cases = [
        (approval(ApprovalPurpose.AFTER_EXECUTION, ran), ran),
        (approval(ApprovalPurpose.AFTER_EXECUTION, ran, status=ApprovalStatus.REJECTED, **decided), ran),
        (approval(ApprovalPurpose.AFTER_EXECUTION, ran, status=ApprovalStatus.APPROVED, **decided), undone_later),
        (approval(ApprovalPurpose.BEFORE_EXECUTION, held, status=ApprovalStatus.APPROVED, **decided), ran),
        (approval(ApprovalPurpose.ROLLBACK, ran, status=ApprovalStatus.APPROVED, rollback_id="rbk_1", **decided), ran),
        (approval(ApprovalPurpose.ROLLBACK, ran, status=ApprovalStatus.REJECTED, rollback_id="rbk_1", **decided), ran),
    ]
    for asked, of in cases:
        assert not decisions.picks_read(asked, SESSION, rollbacks)
        whole = explain(asked, of, SESSION, tallied([*others, of]), rollbacks, words())
        assert explain(asked, of, SESSION, tallied([]), rollbacks, words()) == whole, asked


def test_a_held_call_and_a_pending_undo_are_said_from_their_sessions_actions() -> None:
    others = [action(1), action(2)]
    held = action(3, ActionStatus.PENDING_APPROVAL, undo=None)
    pending_call = approval(ApprovalPurpose.BEFORE_EXECUTION, held)
    assert decisions.picks_read(pending_call, SESSION, []) == {decisions.DONE, rollback.PLANNED}
    refused = approval(ApprovalPurpose.BEFORE_EXECUTION, held, status=ApprovalStatus.REJECTED, resolved_at=NOW)
    rolled_back = [rollback_job(RollbackStatus.SUCCEEDED, finished_at=NOW)]
    assert decisions.picks_read(refused, SESSION, rolled_back) == {rollback.WALKED}
    undo = approval(ApprovalPurpose.ROLLBACK, others[1], rollback_id="rbk_1")
    running = [rollback_job(RollbackStatus.WAITING_APPROVAL)]
    assert decisions.picks_read(undo, SESSION, running) == {rollback.PLANNED}
    with_actions = explain(undo, others[1], SESSION, tallied(others), running, words())
    assert explain(undo, others[1], SESSION, tallied([]), running, words()) != with_actions

"""A write-ahead record the server wrote but whose answer the agent never got (the connection broke after the
commit): the call is still one record, whatever happens next. The SDK makes the call's key before it asks, so
that asked again the server answers the record it wrote, and a call run meanwhile as with AgentRein unreachable
(``failure_mode="open"``), journaled under that key, settles that record when it is replayed. The engine's rules
here; through a server whose answers are lost, in ``test_journal.py``."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest
from test_engine import Clock
from test_lock_order import Meeting, race

from agentrein import ActionStatus
from agentrein_core.commands import Confirmed, ExecutedCall, NewPolicy, WriteAhead
from agentrein_core.engine import Engine, LoggedAction
from agentrein_core.errors import ApprovalRejectedError, InvalidTransitionError, PolicyBlockedError, ValidationError
from agentrein_core.model import Action, Approval, UndoConfig
from agentrein_core.statuses import ApprovalPurpose, ApprovalStatus, OperationType, Plan, SessionStatus
from agentrein_core.store import Store
from agentrein_core.store.approvals import Approvals
from agentrein_core.store.rows import Rows
from agentrein_core.store.sessions import Actions

KEY = "agentrein-3f1c0ffee5eed5a1d5eed5a1d5eed5a1"


# The engine's rules for a replay that finds its write-ahead record ----------------------------------------


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def engine(database_url: str, clock: Clock) -> Engine:
    return Engine(Store(database_url), clock=clock)


@pytest.fixture
def org_id(engine: Engine) -> str:
    return engine.accounts.create_organisation(f"lost-{uuid.uuid4().hex[:8]}", Plan.TEAM).org_id


@pytest.fixture
def session_id(engine: Engine, org_id: str) -> str:
    return engine.recording.new_session(org_id, "agent", "intent").session_id


@pytest.fixture
def on_postgresql(postgres_url: str) -> tuple[Engine, str, str]:
    """An engine on PostgreSQL (where two transactions write at once), an organisation and a session of it."""
    engine = Engine(Store(postgres_url))
    org_id = engine.accounts.create_organisation(f"lost-{uuid.uuid4().hex[:8]}", Plan.TEAM).org_id
    return engine, org_id, engine.recording.new_session(org_id, "agent", "intent").session_id


def written_ahead(engine: Engine, org_id: str, session_id: str, key: str = KEY, **options: Any) -> LoggedAction:
    call = WriteAhead("fake", "things.create", OperationType.CREATE, {"n": 1}, idempotency_key=key, **options)
    return engine.recording.log_action(org_id, session_id, call)


def replayed(
    engine: Engine, org_id: str, session_id: str, *, succeeded: bool = True, error: str | None = None, **fields: Any
) -> Any:
    call = ExecutedCall(
        KEY,
        "fake",
        "things.create",
        OperationType.CREATE,
        {"n": 1},
        succeeded=succeeded,
        response={"id": "t1"} if succeeded else None,
        undo=UndoConfig("fake-delete", {"id": "t1"}) if succeeded else None,
        error=error,
        **fields,
    )
    return engine.recording.record_executed_action(org_id, session_id, call)


def statuses(engine: Engine, org_id: str, session_id: str) -> list[tuple[str, ActionStatus]]:
    return [(a.idempotency_key, a.status) for a in engine.recording.get_session(org_id, session_id).actions]


def test_a_write_ahead_record_asked_for_again_under_its_key_is_the_answer(
    engine: Engine, org_id: str, session_id: str
) -> None:
    first = written_ahead(engine, org_id, session_id)
    again = written_ahead(engine, org_id, session_id)
    assert again.action == first.action and again.approval is None
    assert statuses(engine, org_id, session_id) == [(KEY, ActionStatus.CLEARED)]


def test_a_held_write_ahead_record_asked_for_again_answers_the_request_it_waits_for(
    engine: Engine, org_id: str, session_id: str
) -> None:
    first = written_ahead(engine, org_id, session_id, requires_approval=True)
    again = written_ahead(engine, org_id, session_id, requires_approval=True)
    assert first.approval is not None and again.approval == first.approval


def test_a_blocked_write_ahead_record_asked_for_again_is_refused_by_its_policy_again(
    engine: Engine, org_id: str, session_id: str
) -> None:
    engine.policies.add_policy(org_id, NewPolicy("no creates", "BLOCK", operation_type="CREATE"))
    with pytest.raises(PolicyBlockedError) as first:
        written_ahead(engine, org_id, session_id)
    with pytest.raises(PolicyBlockedError) as again:
        written_ahead(engine, org_id, session_id)
    assert (again.value.action_id, again.value.policy_name) == (first.value.action_id, "no creates")
    assert statuses(engine, org_id, session_id) == [(KEY, ActionStatus.FAILED)]


def test_a_held_write_ahead_record_asked_for_again_on_a_plan_without_approval_gates_is_rejected_again(
    engine: Engine,
) -> None:
    org_id = engine.accounts.create_organisation(f"free-{uuid.uuid4().hex[:8]}", Plan.FREE).org_id
    session_id = engine.recording.new_session(org_id, "agent", "intent").session_id
    with pytest.raises(ApprovalRejectedError) as first:
        written_ahead(engine, org_id, session_id, requires_approval=True)
    with pytest.raises(ApprovalRejectedError) as again:
        written_ahead(engine, org_id, session_id, requires_approval=True)
    assert again.value.action_id == first.value.action_id


def test_a_key_asked_for_again_once_its_call_has_gone_on_is_refused(
    engine: Engine, org_id: str, session_id: str
) -> None:
    written_ahead(engine, org_id, session_id)
    replayed(engine, org_id, session_id)
    with pytest.raises(InvalidTransitionError, match="recorded already"):
        written_ahead(engine, org_id, session_id)


def test_a_key_of_another_call_of_the_session_is_refused_for_a_write_ahead_record(
    engine: Engine, org_id: str, session_id: str
) -> None:
    written_ahead(engine, org_id, session_id)
    other = WriteAhead("fake", "things.delete", OperationType.DELETE, {}, idempotency_key=KEY)
    with pytest.raises(InvalidTransitionError, match="another call's"):
        engine.recording.log_action(org_id, session_id, other)
    assert statuses(engine, org_id, session_id) == [(KEY, ActionStatus.CLEARED)]


@pytest.mark.parametrize("key", ["sk_live_" + "a" * 24, "k" * 94, "agentrein-a b", "agentrein-x\r\nX-Other: y", "clé"])
def test_a_write_ahead_key_that_looks_like_a_secret_leaves_no_room_for_a_suffix_or_cannot_be_a_header_is_refused(
    engine: Engine, org_id: str, session_id: str, key: str
) -> None:
    with pytest.raises(ValidationError) as refused:
        written_ahead(engine, org_id, session_id, key)
    assert refused.value.field == "idempotency_key"
    assert statuses(engine, org_id, session_id) == []


def test_the_replay_of_a_call_that_succeeded_confirms_its_cleared_write_ahead_record_once(
    engine: Engine, org_id: str, session_id: str
) -> None:
    logged = written_ahead(engine, org_id, session_id)
    settled = replayed(engine, org_id, session_id)
    assert settled.action_id == logged.action.action_id and settled.status is ActionStatus.SUCCESS
    assert settled.undo == UndoConfig("fake-delete", {"id": "t1"})
    assert replayed(engine, org_id, session_id) == settled  # the journal sent it again
    assert statuses(engine, org_id, session_id) == [(KEY, ActionStatus.SUCCESS)]


def test_the_replay_of_a_call_that_failed_fails_its_cleared_write_ahead_record_and_rolls_the_session_back_once(
    engine: Engine, org_id: str, session_id: str
) -> None:
    logged = written_ahead(engine, org_id, session_id)
    failed = replayed(engine, org_id, session_id, succeeded=False, error="HTTPStatusError: 500")
    assert failed.action_id == logged.action.action_id and failed.status is ActionStatus.FAILED
    assert failed.error == "HTTPStatusError: 500"
    assert replayed(engine, org_id, session_id, succeeded=False, error="HTTPStatusError: 500") == failed
    assert statuses(engine, org_id, session_id) == [(KEY, ActionStatus.FAILED)]
    assert engine.recording.get_session(org_id, session_id).status is not SessionStatus.ACTIVE


def test_a_call_that_ran_while_its_write_ahead_record_was_held_is_recorded_beside_it_for_review(
    engine: Engine, org_id: str, session_id: str
) -> None:
    held = written_ahead(engine, org_id, session_id, requires_approval=True)
    ran = replayed(engine, org_id, session_id)
    assert ran.idempotency_key == f"{KEY}-ran" and ran.status is ActionStatus.SUCCESS
    assert replayed(engine, org_id, session_id) == ran
    withdrawn = engine.recording.get_session(org_id, session_id).actions[0]
    assert withdrawn.action_id == held.action.action_id and withdrawn.status is ActionStatus.FAILED
    assert withdrawn.error is not None and withdrawn.error.startswith("withdrawn: the call ran without waiting")
    approvals = {(a.action_id, a.purpose): a for a in engine.reviews.list_approvals(org_id)}
    request = approvals[held.action.action_id, ApprovalPurpose.BEFORE_EXECUTION]
    assert request.status is ApprovalStatus.REJECTED and request.reason == withdrawn.error
    assert approvals[ran.action_id, ApprovalPurpose.AFTER_EXECUTION].status is ApprovalStatus.PENDING


def test_a_long_failure_replayed_twice_fails_its_write_ahead_record_once(
    engine: Engine, org_id: str, session_id: str
) -> None:
    # Cut to what a record keeps, the text ends in 16 digits that look like a card: the stored text must be what
    # a second replay of the same failure makes of it, or the second is taken for another call.
    error = "A" * 9983 + " " + "4111111111111111" + "12345"
    written_ahead(engine, org_id, session_id)
    failed = replayed(engine, org_id, session_id, succeeded=False, error=error)
    assert replayed(engine, org_id, session_id, succeeded=False, error=error) == failed
    assert statuses(engine, org_id, session_id) == [(KEY, ActionStatus.FAILED)]


def test_a_call_that_ran_while_held_in_a_sandbox_session_rolled_back_meanwhile_is_recorded_beside_it(
    engine: Engine, org_id: str
) -> None:
    session_id = engine.recording.new_session(org_id, "agent", "intent", sandbox=True).session_id
    earlier = written_ahead(engine, org_id, session_id, "agentrein-earlier").action
    engine.recording.confirm_action(org_id, earlier.action_id, Confirmed({}, UndoConfig("fake-delete", {"id": "t0"})))
    written_ahead(engine, org_id, session_id, requires_approval=True)
    engine.rollbacks.request_rollback(org_id, session_id, caller_role="operator", requested_by="t")
    flipped = [("agentrein-earlier", ActionStatus.ROLLED_BACK), (KEY, ActionStatus.ROLLED_BACK)]
    assert statuses(engine, org_id, session_id) == flipped  # the held one never ran
    ran = replayed(engine, org_id, session_id)
    assert ran.idempotency_key == f"{KEY}-ran"
    assert replayed(engine, org_id, session_id).action_id == ran.action_id  # since flipped too: it ran before
    assert [key for key, _ in statuses(engine, org_id, session_id)] == ["agentrein-earlier", KEY, f"{KEY}-ran"]


def test_a_call_that_ran_although_its_write_ahead_record_was_blocked_is_recorded_beside_it_for_review(
    engine: Engine, org_id: str, session_id: str
) -> None:
    engine.policies.add_policy(org_id, NewPolicy("no creates", "BLOCK", operation_type="CREATE"))
    with pytest.raises(PolicyBlockedError):
        written_ahead(engine, org_id, session_id)
    ran = replayed(engine, org_id, session_id)
    assert replayed(engine, org_id, session_id) == ran
    assert statuses(engine, org_id, session_id) == [(KEY, ActionStatus.FAILED), (f"{KEY}-ran", ActionStatus.SUCCESS)]
    (review,) = [a for a in engine.reviews.list_approvals(org_id) if a.action_id == ran.action_id]
    assert review.purpose is ApprovalPurpose.AFTER_EXECUTION and review.status is ApprovalStatus.PENDING


def test_a_replay_under_the_key_of_another_call_is_answered_with_that_record_as_before(
    engine: Engine, org_id: str, session_id: str
) -> None:
    logged = written_ahead(engine, org_id, session_id)
    other = ExecutedCall(KEY, "fake", "things.delete", OperationType.DELETE, {}, succeeded=True, response={})
    assert engine.recording.record_executed_action(org_id, session_id, other) == logged.action
    assert statuses(engine, org_id, session_id) == [(KEY, ActionStatus.CLEARED)]


class Undoing:
    """Runs inverses by noting their keys."""

    hands_over = False

    def __init__(self) -> None:
        self.undone: list[str] = []

    def can_run(self, action: Action) -> bool:
        return True

    def run_undo(self, action: Action) -> None:
        self.undone.append(action.undo_idempotency_key)


def test_a_cleared_record_settled_by_a_replay_after_the_session_was_rolled_back_is_undone_too(
    engine: Engine, clock: Clock, org_id: str, session_id: str
) -> None:
    earlier = written_ahead(engine, org_id, session_id, "agentrein-earlier").action
    engine.recording.confirm_action(org_id, earlier.action_id, Confirmed({}, UndoConfig("fake-delete", {"id": "t0"})))
    written_ahead(engine, org_id, session_id)
    executor = Undoing()
    job = engine.rollbacks.request_rollback(org_id, session_id, caller_role="operator", requested_by="t")
    engine.rollbacks.run_rollback(org_id, job.rollback_id, executor)  # waits a while for the record's outcome
    clock.advance(seconds=31)
    engine.rollbacks.run_rollback(org_id, job.rollback_id, executor)  # then undoes the rest: CLEARED is never undone
    assert executor.undone == ["agentrein-earlier-undo"]
    assert replayed(engine, org_id, session_id).status is ActionStatus.SUCCESS
    while engine.rollbacks.run_next_rollback(executor) is not None:
        pass
    assert executor.undone == ["agentrein-earlier-undo", f"{KEY}-undo"]
    assert statuses(engine, org_id, session_id) == [
        ("agentrein-earlier", ActionStatus.ROLLED_BACK),
        (KEY, ActionStatus.ROLLED_BACK),
    ]


def test_a_write_ahead_record_asked_for_again_while_the_first_ask_is_under_way_answers_the_first(
    on_postgresql: tuple[Engine, str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # PostgreSQL: the second ask reads no record under the key (the first is not committed), then its insert waits
    # on the unique key until the first commits. Before, it was refused ("a concurrent change conflicts"), which
    # the SDK takes for a recording failure.
    engine, org_id, session_id = on_postgresql
    meeting = Meeting()
    monkeypatch.setattr(Rows, "insert", meeting.at("first", Rows.insert, then=0.5))  # its record written
    monkeypatch.setattr(Actions, "by_key", meeting.at("again", Actions.by_key))  # found none
    answers: list[LoggedAction] = []
    errors = race(
        first=lambda: answers.append(written_ahead(engine, org_id, session_id)),
        again=lambda: answers.append(written_ahead(engine, org_id, session_id)),
    )
    assert errors == []
    assert [a.action.action_id for a in answers] == [answers[0].action.action_id] * 2
    assert statuses(engine, org_id, session_id) == [(KEY, ActionStatus.CLEARED)]


def test_a_replay_that_finds_its_write_ahead_record_still_uncommitted_settles_it_once_committed(
    on_postgresql: tuple[Engine, str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # PostgreSQL: the replay reads no record under the key (the write-ahead is not committed), then waits on the
    # session until it is, and its own record is refused by the key. Before, it answered the write-ahead record,
    # left CLEARED: the journal entry was dropped and the call's outcome lost.
    engine, org_id, session_id = on_postgresql
    meeting = Meeting()
    monkeypatch.setattr(Rows, "insert", meeting.at("ask", Rows.insert, then=0.5))  # its record written
    monkeypatch.setattr(Actions, "by_key", meeting.at("replay", Actions.by_key))  # found none
    errors = race(
        ask=lambda: written_ahead(engine, org_id, session_id), replay=lambda: replayed(engine, org_id, session_id)
    )
    assert errors == []
    assert statuses(engine, org_id, session_id) == [(KEY, ActionStatus.SUCCESS)]


def test_a_replay_that_finds_its_held_record_approved_as_it_withdraws_it_settles_it_instead(
    on_postgresql: tuple[Engine, str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # PostgreSQL: a reviewer approves the held record between the replay's read of it and its hold of the request.
    # Before, the replay was refused ("changed concurrently") and the journal entry set aside: the call unrecorded.
    engine, org_id, session_id = on_postgresql
    held = written_ahead(engine, org_id, session_id, requires_approval=True)
    assert held.approval is not None
    holding = Approvals.hold_pending_of

    def approved_first(approvals: Approvals, action_id: str) -> list[Approval]:
        if threading.current_thread().name == "replay":  # the reviewer, done before the replay holds the request
            reviewer = threading.Thread(target=engine.reviews.approve, args=(org_id, held.approval.approval_id, "ada"))
            reviewer.start()
            reviewer.join(30)
        return holding(approvals, action_id)

    monkeypatch.setattr(Approvals, "hold_pending_of", approved_first)
    (errors,) = [race(replay=lambda: replayed(engine, org_id, session_id))]
    assert errors == []
    assert statuses(engine, org_id, session_id) == [(KEY, ActionStatus.SUCCESS)]

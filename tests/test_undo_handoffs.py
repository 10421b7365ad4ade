"""Undos the server hands to the agent process that holds the client (DESIGN §4a), at the engine: offered by the
rollback, taken under a lease, reported; or failing with the reason when nobody takes or reports them."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from test_engine import Clock, clock, run_actions

from agentrein_core.engine import Engine
from agentrein_core.errors import LeaseLostError
from agentrein_core.model import Action, Rollback
from agentrein_core.statuses import ActionStatus, Plan, Role, RollbackStatus, UndoStatus
from agentrein_core.store import Store


class AgentsOnly:
    """The server's executor for a connector with no server side: it runs nothing, and hands every undo over."""

    hands_over = True

    def can_run(self, action: Action) -> bool:
        return False

    def run_undo(self, action: Action) -> None:
        raise AssertionError("a handed undo is run by the agent's process, never here")


__all__ = ["clock"]  # the engine tests' clock fixture, used here too


@pytest.fixture
def engine(database_url: str, clock: Clock) -> Engine:
    return Engine(Store(database_url), clock=clock, agent_undo_wait=timedelta(seconds=30))


def started(engine: Engine, n: int = 2) -> tuple[str, str, str, list[Action]]:
    """An organisation, an agent key's session with ``n`` undoable actions, and its rollback requested."""
    org = engine.accounts.create_organisation(f"handoff-{uuid.uuid4().hex[:8]}", Plan.TEAM)
    key, _ = engine.accounts.create_api_key(org.org_id, Role.AGENT)
    session = engine.recording.new_session(org.org_id, "notes-agent", opened_by_key=key.key_id)
    actions = run_actions(engine, org.org_id, session.session_id, n)
    engine.rollbacks.request_rollback(org.org_id, session.session_id, caller_role="agent", requested_by="agent")
    return org.org_id, key.key_id, session.session_id, actions


def advanced(engine: Engine, org_id: str, session_id: str) -> Rollback:
    """The session's rollback, advanced as far as it goes now (by its id: on a shared database, a job another
    test left due is not this one)."""
    job = engine.rollbacks.latest_rollback(org_id, session_id)
    assert job is not None
    return engine.rollbacks.run_rollback(org_id, job.rollback_id, AgentsOnly())


def taken_undo(engine: Engine) -> tuple[str, str, str, Action, str]:
    """A session of one undoable action whose rollback has handed its undo over, taken by the agent's key:
    the organisation, the key, the session, the action and the lease."""
    org_id, key, session_id, (action,) = started(engine, 1)
    advanced(engine, org_id, session_id)
    claimed = engine.rollbacks.claim_handed_undo(org_id, [session_id], ["fake"], 0, agent_key=key)
    assert claimed is not None and claimed.handoff.lease_id is not None
    return org_id, key, session_id, action, claimed.handoff.lease_id


def test_a_handed_undo_is_taken_by_the_agent_process_and_the_rollback_goes_on_once_it_reports(engine: Engine) -> None:
    org_id, key, session_id, (first, second) = started(engine)
    job = engine.rollbacks.run_next_rollback(AgentsOnly())
    assert job is not None and job.status is RollbackStatus.RUNNING  # waits for the agent's process
    taken = engine.rollbacks.claim_handed_undo(org_id, [session_id], ["fake"], 0, agent_key=key)
    assert taken is not None and taken.action.action_id == second.action_id  # last first
    assert taken.action.undo_status is UndoStatus.IN_PROGRESS
    assert engine.rollbacks.claim_handed_undo(org_id, [session_id], ["fake"], 0, agent_key=key) is None  # once
    assert taken.handoff.lease_id is not None
    engine.rollbacks.report_handed_undo(org_id, second.action_id, taken.handoff.lease_id, True, agent_key=key)
    engine.rollbacks.run_next_rollback(AgentsOnly())
    taken = engine.rollbacks.claim_handed_undo(org_id, [session_id], ["fake"], 0, agent_key=key)
    assert taken is not None and taken.action.action_id == first.action_id and taken.handoff.lease_id
    engine.rollbacks.report_handed_undo(org_id, first.action_id, taken.handoff.lease_id, True, agent_key=key)
    job = engine.rollbacks.run_next_rollback(AgentsOnly())
    assert job is not None and job.status is RollbackStatus.SUCCEEDED
    view = engine.recording.get_session(org_id, session_id)
    assert [a.status for a in view.actions] == [ActionStatus.ROLLED_BACK] * 2


def test_a_rollback_as_shown_names_the_undo_it_waits_on_in_the_agents_process_until_that_is_reported(
    engine: Engine,
) -> None:
    org_id, key, session_id, (action,) = started(engine, 1)
    job = advanced(engine, org_id, session_id)
    offered = engine.rollbacks.shown(org_id, job).undo_with_agent
    assert offered is not None and (offered.action_id, offered.taken, offered.report_by) == (
        action.action_id,
        False,
        None,
    )
    assert offered.offered_until > offered.offered_at
    claimed = engine.rollbacks.claim_handed_undo(org_id, [session_id], ["fake"], 0, agent_key=key)
    assert claimed is not None and claimed.handoff.lease_id is not None
    taken = engine.rollbacks.shown(org_id, job).undo_with_agent
    assert taken is not None and taken.taken and taken.report_by == claimed.handoff.leased_until
    engine.rollbacks.report_handed_undo(org_id, action.action_id, claimed.handoff.lease_id, True, agent_key=key)
    finished = advanced(engine, org_id, session_id)
    assert finished.status is RollbackStatus.SUCCEEDED
    assert engine.rollbacks.shown(org_id, finished).undo_with_agent is None


def test_an_undo_no_agent_process_takes_in_time_fails_the_rollback_with_that_reason(
    engine: Engine, clock: Clock
) -> None:
    org_id, _, session_id, _ = started(engine, 1)
    engine.rollbacks.run_next_rollback(AgentsOnly())
    clock.advance(seconds=29)
    assert engine.rollbacks.run_next_rollback(AgentsOnly()) is None  # not due before the offer ends
    clock.advance(seconds=2)
    job = engine.rollbacks.run_next_rollback(AgentsOnly())
    assert job is not None and job.status is RollbackStatus.FAILED
    assert "no agent process took its undo within 30 s" in (job.error or "")
    (action,) = engine.recording.get_session(org_id, session_id).actions
    assert (action.status, action.undo_status) == (ActionStatus.ROLLBACK_FAILED, UndoStatus.FAILED)


def test_an_undo_taken_and_never_reported_fails_once_its_lease_ends_and_a_late_report_is_refused(
    engine: Engine, clock: Clock
) -> None:
    org_id, key, session_id, action, lease_id = taken_undo(engine)
    clock.advance(seconds=121)
    job = advanced(engine, org_id, session_id)
    assert job.status is RollbackStatus.FAILED
    assert "did not report the outcome before its lease ended" in (job.error or "")
    with pytest.raises(LeaseLostError):
        engine.rollbacks.report_handed_undo(org_id, action.action_id, lease_id, True, agent_key=key)


def test_a_report_under_another_lease_is_refused(engine: Engine) -> None:
    org_id, key, _, action, _ = taken_undo(engine)
    with pytest.raises(LeaseLostError):
        engine.rollbacks.report_handed_undo(org_id, action.action_id, "not-the-lease", True, agent_key=key)


def test_an_undo_the_agent_process_could_not_run_fails_the_rollback_with_its_error(engine: Engine) -> None:
    org_id, key, session_id, action, lease_id = taken_undo(engine)
    error = "UndoError: memory.delete_entities answered an error: gone"
    engine.rollbacks.report_handed_undo(org_id, action.action_id, lease_id, False, error, agent_key=key)
    job = advanced(engine, org_id, session_id)
    assert job.status is RollbackStatus.FAILED
    assert "the agent's process could not undo it: UndoError: memory.delete_entities" in (job.error or "")


def test_an_agent_key_takes_only_the_undos_of_its_own_sessions(engine: Engine) -> None:
    org_id, _, session_id, _ = started(engine, 1)
    other, _ = engine.accounts.create_api_key(org_id, Role.AGENT)
    engine.rollbacks.run_next_rollback(AgentsOnly())
    assert engine.rollbacks.claim_handed_undo(org_id, [session_id], ["fake"], 0, agent_key=other.key_id) is None
    assert engine.rollbacks.claim_handed_undo(org_id, [session_id], ["stripe"], 0) is None  # not its connector


def test_the_same_report_again_is_answered_as_the_first_was(engine: Engine) -> None:
    org_id, key, _, action, lease_id = taken_undo(engine)
    first = engine.rollbacks.report_handed_undo(org_id, action.action_id, lease_id, True, agent_key=key)
    again = engine.rollbacks.report_handed_undo(org_id, action.action_id, lease_id, True, agent_key=key)
    assert again == first
    with pytest.raises(LeaseLostError):  # a different outcome is not the same report
        engine.rollbacks.report_handed_undo(org_id, action.action_id, lease_id, False, agent_key=key)


def test_a_claim_waits_only_while_one_of_its_sessions_is_being_rolled_back(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    org = engine.accounts.create_organisation(f"idle-{uuid.uuid4().hex[:8]}", Plan.TEAM)
    session = engine.recording.new_session(org.org_id, "notes-agent")
    run_actions(engine, org.org_id, session.session_id, 1)

    def no_waiting(remaining: float) -> None:
        raise AssertionError("an idle process's claim must not hold the server")

    monkeypatch.setattr(engine.rollbacks.waiters, "wait", no_waiting)
    assert engine.rollbacks.claim_handed_undo(org.org_id, [session.session_id], ["fake"], 30) is None


def test_an_undo_handed_to_the_agent_is_never_run_here_too_once_the_settings_would_let_this_process_run_it(
    engine: Engine,
) -> None:
    class SettingsChanged(AgentsOnly):
        """As the server's executor is once an operator names the MCP server in the organisation's settings."""

        def __init__(self) -> None:
            self.may_run = False
            self.ran: list[str] = []

        def can_run(self, action: Action) -> bool:
            return self.may_run

        def run_undo(self, action: Action) -> None:
            self.ran.append(action.action_id)

    org_id, key, session_id, (action,) = started(engine, 1)
    executor = SettingsChanged()
    requested = engine.rollbacks.latest_rollback(org_id, session_id)
    assert requested is not None
    engine.rollbacks.run_rollback(org_id, requested.rollback_id, executor)  # offered to the agent's process
    taken = engine.rollbacks.claim_handed_undo(org_id, [session_id], ["fake"], 0, agent_key=key)
    assert taken is not None and taken.handoff.lease_id is not None
    executor.may_run = True  # the operator names the server, as the rollback's obstacle told them to
    engine.rollbacks.report_handed_undo(org_id, action.action_id, taken.handoff.lease_id, True, agent_key=key)
    job = engine.rollbacks.run_rollback(org_id, requested.rollback_id, executor)
    assert executor.ran == []  # the agent's process ran it: once
    assert job.status is RollbackStatus.SUCCEEDED


def test_a_taker_that_renews_its_lease_reports_an_undo_that_outlasted_the_first_lease(
    engine: Engine, clock: Clock
) -> None:
    org_id, key, session_id, action, lease_id = taken_undo(engine)
    for _ in range(3):  # 300 s in all, well past the 120 s of one lease
        clock.advance(seconds=100)
        renewed = engine.rollbacks.renew_handed_undo(org_id, action.action_id, lease_id, agent_key=key)
        assert renewed.leased_until == clock.now + timedelta(seconds=120)
        advanced(engine, org_id, session_id)  # the job, due at the old lease's end, waits on
    engine.rollbacks.report_handed_undo(org_id, action.action_id, lease_id, True, agent_key=key)
    job = advanced(engine, org_id, session_id)
    assert job.status is RollbackStatus.SUCCEEDED
    (undone,) = engine.recording.get_session(org_id, session_id).actions
    assert (undone.status, undone.undo_status) == (ActionStatus.ROLLED_BACK, UndoStatus.DONE)


def test_a_taker_that_stops_renewing_has_its_undo_failed_and_it_is_never_offered_again(
    engine: Engine, clock: Clock
) -> None:
    org_id, key, session_id, action, lease_id = taken_undo(engine)
    clock.advance(seconds=100)
    engine.rollbacks.renew_handed_undo(org_id, action.action_id, lease_id, agent_key=key)
    clock.advance(seconds=121)  # the taker died
    job = advanced(engine, org_id, session_id)
    assert job.status is RollbackStatus.FAILED
    assert "did not report the outcome before its lease ended" in (job.error or "")
    with pytest.raises(LeaseLostError):
        engine.rollbacks.renew_handed_undo(org_id, action.action_id, lease_id, agent_key=key)
    assert engine.rollbacks.claim_handed_undo(org_id, [session_id], ["fake"], 0, agent_key=key) is None


def test_a_lease_renewed_after_its_end_is_refused_even_before_the_rollback_gives_up_on_it(
    engine: Engine, clock: Clock
) -> None:
    org_id, key, session_id, action, lease_id = taken_undo(engine)
    clock.advance(seconds=121)
    with pytest.raises(LeaseLostError):
        engine.rollbacks.renew_handed_undo(org_id, action.action_id, lease_id, agent_key=key)
    job = advanced(engine, org_id, session_id)
    assert job.status is RollbackStatus.FAILED


def test_a_renewal_under_another_lease_or_after_the_report_is_refused(engine: Engine) -> None:
    org_id, key, _, action, lease_id = taken_undo(engine)
    with pytest.raises(LeaseLostError):
        engine.rollbacks.renew_handed_undo(org_id, action.action_id, "not-the-lease", agent_key=key)
    engine.rollbacks.report_handed_undo(org_id, action.action_id, lease_id, True, agent_key=key)
    with pytest.raises(LeaseLostError):
        engine.rollbacks.renew_handed_undo(org_id, action.action_id, lease_id, agent_key=key)

"""An undo handed to the agent's process stays the agent's across rollbacks (DESIGN §4a, §4 "once"): a later
rollback never runs it in the server's process, even once the organisation's settings would let it."""

from __future__ import annotations

from test_engine import Clock, clock
from test_undo_handoffs import AgentsOnly, engine, started

from agentrein_core.engine import Engine
from agentrein_core.model import Action
from agentrein_core.statuses import RollbackStatus

__all__ = ["clock", "engine"]  # the fixtures of the handoff tests, used here too


class SettingsChanged(AgentsOnly):
    """The server's executor once an operator names the MCP server in the organisation's settings: it could run
    the undo here too."""

    def __init__(self) -> None:
        self.ran: list[str] = []

    def can_run(self, action: Action) -> bool:
        return True

    def run_undo(self, action: Action) -> None:
        self.ran.append(action.action_id)


def test_an_undo_whose_taker_went_silent_is_handed_to_the_agent_again_never_run_here_by_the_next_rollback(
    engine: Engine, clock: Clock
) -> None:
    org_id, key, session_id, (_, action) = started(engine, 2)  # the first stays to roll back again
    first = engine.rollbacks.latest_rollback(org_id, session_id)
    assert first is not None
    engine.rollbacks.run_rollback(org_id, first.rollback_id, AgentsOnly())  # offered to the agent's process
    taken = engine.rollbacks.claim_handed_undo(org_id, [session_id], ["fake"], 0, agent_key=key)
    assert taken is not None
    clock.advance(seconds=121)  # the taker went silent: the undo may have run
    failed = engine.rollbacks.run_rollback(org_id, first.rollback_id, AgentsOnly())
    assert failed.status is RollbackStatus.FAILED and "it may have run" in (failed.error or "")
    executor = SettingsChanged()
    engine.rollbacks.request_rollback(org_id, session_id, caller_role="operator", requested_by="ops")
    second = engine.rollbacks.latest_rollback(org_id, session_id)
    assert second is not None and second.rollback_id != first.rollback_id
    job = engine.rollbacks.run_rollback(org_id, second.rollback_id, executor)
    assert executor.ran == []  # not run here: where it may have run before, the agent's process decides
    assert job.status is RollbackStatus.RUNNING  # waits for the agent's process
    again = engine.rollbacks.claim_handed_undo(org_id, [session_id], ["fake"], 0, agent_key=key)
    assert again is not None and again.action.action_id == action.action_id


def test_an_undo_never_handed_is_run_here_when_this_process_can(engine: Engine) -> None:
    org_id, _, session_id, (action,) = started(engine, 1)
    executor = SettingsChanged()
    requested = engine.rollbacks.latest_rollback(org_id, session_id)
    assert requested is not None
    job = engine.rollbacks.run_rollback(org_id, requested.rollback_id, executor)
    assert executor.ran == [action.action_id]
    assert job.status is RollbackStatus.SUCCEEDED

"""The SDK's transport: the one interface through which it reaches AgentRein.

:class:`Backend` is what the SDK needs; :class:`LocalBackend` implements it on an in-process
:class:`~agentrein_core.engine.Engine` (embedded mode, no server). A server transport implements the same
interface over HTTP (:class:`agentrein.remote.RemoteBackend`), so the public API and its errors are the same in
both modes.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Protocol

from agentrein_core.engine import Engine, LoggedAction
from agentrein_core.errors import ValidationError
from agentrein_core.model import JSON, Action, Policy, Rollback, UndoConfig
from agentrein_core.rollback import UndoExecutor
from agentrein_core.statuses import ApprovalStatus, OperationType, PolicyEffect
from agentrein_core.views import ApprovalInfo, SessionInfo

if TYPE_CHECKING:
    from agentrein.journal import ExecutedCall


class Backend(Protocol):
    #: Whether rollbacks run in this process (embedded: through the wrapped clients) or in the server.
    runs_undos: bool
    #: Whose records these are (a database and organisation, or a server and key): the journal replays an
    #: entry only to the backend that journaled it.
    identity: str

    def new_session(self, agent_id: str, intent: str, sandbox: bool) -> SessionInfo: ...
    def get_session(self, session_id: str) -> SessionInfo: ...
    def list_sessions(self, limit: int) -> list[SessionInfo]: ...
    def complete_session(self, session_id: str) -> SessionInfo: ...
    def log_action(
        self,
        session_id: str,
        *,
        connector: str,
        api_name: str,
        operation_type: OperationType,
        payload: JSON,
        requires_approval: bool,
        approval_timeout: timedelta,
    ) -> LoggedAction: ...
    def confirm_action(
        self, session_id: str, action_id: str, *, response: JSON | None, undo: UndoConfig | None
    ) -> Action: ...
    def fail_action(self, session_id: str, action_id: str, *, error: str) -> Action: ...
    def record_executed_action(self, session_id: str, call: ExecutedCall) -> Action: ...
    def get_approval(self, approval_id: str) -> ApprovalInfo: ...
    def wait_for_decision(self, approval_id: str, timeout: float) -> ApprovalInfo: ...
    def list_approvals(self, status: ApprovalStatus | None) -> list[ApprovalInfo]: ...
    def approve(self, approval_id: str, reviewer: str | None, reason: str | None) -> ApprovalInfo: ...
    def reject(self, approval_id: str, reviewer: str | None, reason: str | None) -> ApprovalInfo: ...
    def add_policy(
        self,
        name: str,
        effect: PolicyEffect | str,
        *,
        connector: str | None,
        api_name: str | None,
        agent_id: str | None,
        operation_type: str | None,
    ) -> Policy: ...
    def list_policies(self) -> list[Policy]: ...
    def set_policy_enabled(self, policy_id: str, enabled: bool) -> Policy: ...
    def remove_policy(self, policy_id: str) -> None: ...
    def request_rollback(
        self, session_id: str, *, requested_by: str, trigger: str, approval_timeout: timedelta | None
    ) -> Rollback: ...
    def active_rollback(self, session_id: str) -> Rollback | None: ...
    def run_rollback(self, job: Rollback, executor: UndoExecutor, approval_timeout: timedelta) -> Rollback: ...
    def rollbacks_to_run(self) -> list[Rollback]: ...
    def maintain(self) -> None: ...


class LocalBackend:
    """Embedded mode: the engine runs in this process on the store given to it.

    The embedded caller owns its database, so it has an operator's rights (it may, for instance, roll back a
    session it already completed)."""

    role = "operator"
    runs_undos = True

    def __init__(self, engine: Engine, org_id: str) -> None:
        self.engine = engine
        self.org_id = org_id
        self.identity = f"{engine.store.url} organisation {org_id}"

    def new_session(self, agent_id: str, intent: str, sandbox: bool) -> SessionInfo:
        session = self.engine.new_session(self.org_id, agent_id, intent, sandbox)
        return self.engine.get_session(self.org_id, session.session_id)

    def get_session(self, session_id: str) -> SessionInfo:
        return self.engine.get_session(self.org_id, session_id)

    def list_sessions(self, limit: int) -> list[SessionInfo]:
        return self.engine.list_sessions(self.org_id, limit).sessions

    def complete_session(self, session_id: str) -> SessionInfo:
        return self.engine.complete_session(self.org_id, session_id)

    def log_action(
        self,
        session_id: str,
        *,
        connector: str,
        api_name: str,
        operation_type: OperationType,
        payload: JSON,
        requires_approval: bool,
        approval_timeout: timedelta,
    ) -> LoggedAction:
        return self.engine.log_action(
            self.org_id,
            session_id,
            connector=connector,
            api_name=api_name,
            operation_type=operation_type,
            payload=payload,
            requires_approval=requires_approval,
            approval_timeout=approval_timeout,
        )

    def confirm_action(
        self, session_id: str, action_id: str, *, response: JSON | None, undo: UndoConfig | None
    ) -> Action:
        return self.engine.confirm_action(self.org_id, action_id, response=response, undo=undo, session_id=session_id)

    def fail_action(self, session_id: str, action_id: str, *, error: str) -> Action:
        return self.engine.fail_action(self.org_id, action_id, error=error, session_id=session_id)

    def record_executed_action(self, session_id: str, call: ExecutedCall) -> Action:
        return self.engine.record_executed_action(
            self.org_id,
            session_id,
            idempotency_key=call.idempotency_key,
            connector=call.connector,
            api_name=call.api_name,
            operation_type=call.operation_type,
            payload=call.payload,
            succeeded=call.succeeded,
            response=call.response,
            undo=call.undo,
            error=call.error,
        )

    def get_approval(self, approval_id: str) -> ApprovalInfo:
        return self.engine.get_approval(self.org_id, approval_id)

    def wait_for_decision(self, approval_id: str, timeout: float) -> ApprovalInfo:
        return self.engine.wait_for_decision(self.org_id, approval_id, timeout)

    def list_approvals(self, status: ApprovalStatus | None) -> list[ApprovalInfo]:
        return self.engine.list_approvals(self.org_id, status)

    def approve(self, approval_id: str, reviewer: str | None, reason: str | None) -> ApprovalInfo:
        self.engine.approve(self.org_id, approval_id, _named(reviewer), reason)
        return self.engine.get_approval(self.org_id, approval_id)

    def reject(self, approval_id: str, reviewer: str | None, reason: str | None) -> ApprovalInfo:
        self.engine.reject(self.org_id, approval_id, _named(reviewer), reason)
        return self.engine.get_approval(self.org_id, approval_id)

    def add_policy(
        self,
        name: str,
        effect: PolicyEffect | str,
        *,
        connector: str | None,
        api_name: str | None,
        agent_id: str | None,
        operation_type: str | None,
    ) -> Policy:
        return self.engine.add_policy(
            self.org_id,
            name,
            effect,
            connector=connector,
            api_name=api_name,
            agent_id=agent_id,
            operation_type=operation_type,
        )

    def list_policies(self) -> list[Policy]:
        return self.engine.list_policies(self.org_id)

    def set_policy_enabled(self, policy_id: str, enabled: bool) -> Policy:
        return self.engine.set_policy_enabled(self.org_id, policy_id, enabled)

    def remove_policy(self, policy_id: str) -> None:
        self.engine.delete_policy(self.org_id, policy_id)

    def request_rollback(
        self, session_id: str, *, requested_by: str, trigger: str, approval_timeout: timedelta | None
    ) -> Rollback:
        return self.engine.request_rollback(
            self.org_id,
            session_id,
            caller_role=self.role,
            requested_by=requested_by,
            trigger=trigger,
            approval_timeout=approval_timeout,
        )

    def active_rollback(self, session_id: str) -> Rollback | None:
        return self.engine.active_rollback(self.org_id, session_id)

    def run_rollback(self, job: Rollback, executor: UndoExecutor, approval_timeout: timedelta) -> Rollback:
        return self.engine.run_rollback(self.org_id, job.rollback_id, executor, approval_timeout)

    def rollbacks_to_run(self) -> list[Rollback]:
        return self.engine.rollbacks_to_run(self.org_id)

    def maintain(self) -> None:
        self.engine.maintain()


def _named(reviewer: str | None) -> str:
    if reviewer is None:
        raise ValidationError("reviewer", "name who decides (embedded mode has no API key to name them by)")
    return reviewer

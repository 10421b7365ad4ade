"""Embedded mode: the engine runs in this process, on the database given to it (no server).

Everything a server's workers would do happens here instead: the undos of a rollback run through the clients
wrapped in this process, or the organisation's stored connector settings where it wrapped none
(:class:`~agentrein.executor.ClientUndoExecutor`), approvals past their time are expired and idle sessions
abandoned now and then as this process reads, and intent checks run in a background thread
(:mod:`agentrein.checks`). The embedded caller owns its database, so it has an operator's rights (it
may, for instance, roll back a session it already completed).
"""

from __future__ import annotations

import logging
import shlex
import threading
import time
from datetime import timedelta

from agentrein.checks import BackgroundChecks
from agentrein.executor import ClientUndoExecutor
from agentrein.port import ExecutedCall
from agentrein.settle import outlasting, see_through
from agentrein_core.database import shown_database_url
from agentrein_core.engine import DEFAULT_ORGANISATION, Engine
from agentrein_core.errors import AgentReinError, UndoUnavailableError, ValidationError
from agentrein_core.model import JSON, Action, Approval, Policy, Rollback, UndoConfig
from agentrein_core.plugins import Connectors
from agentrein_core.settings_undo import SettingsUndoExecutor
from agentrein_core.statuses import ApprovalStatus, OperationType, PolicyEffect, Role
from agentrein_core.store import Store
from agentrein_core.vault import reader_of, secret_key_file
from agentrein_core.verifiers import IntentChecks
from agentrein_core.views import ApprovalInfo, LoggedAction, SessionInfo, SessionSummary

log = logging.getLogger("agentrein")

#: How often embedded mode looks for expired approvals, idle sessions and rollbacks left to run.
MAINTENANCE_EVERY = 30.0
#: How long a rollback approval opened by a rollback this process drives waits, when the caller waits for
#: none (a rollback resumed after a decision); otherwise it waits as long as the caller does.
DEFAULT_APPROVAL_WAIT = 300.0
#: How often a rollback held by another process (or waiting for one that holds the clients) is looked at.
LOOK_AGAIN = 0.5


class EmbeddedMode:
    """The engine's use cases in one organisation, undoing through ``clients``; with ``intent_checks``, the
    organisation's intent checks run in a background thread. An agent's process opens it with
    :meth:`for_agent`; the command line makes one with no checks, on a database it opened."""

    def __init__(
        self,
        engine: Engine,
        org_id: str,
        clients: ClientUndoExecutor,
        intent_checks: IntentChecks | None = None,
        *,
        organisation: str = DEFAULT_ORGANISATION,
    ) -> None:
        self.engine = engine
        self.org_id = org_id
        #: The organisation's name, as the command line takes it (``--org``).
        self.organisation = organisation
        self.identity = f"{engine.store.url} organisation {org_id}"
        self.clients = clients
        self._last_maintenance = float("-inf")
        self._lock = threading.Lock()
        self._checks = BackgroundChecks(intent_checks, org_id, self._resume) if intent_checks else None
        if self._checks is not None:
            self._checks.poke()  # checks a process before this one left unasked

    @classmethod
    def for_agent(cls, store: Store, organisation: str, connectors: Connectors) -> EmbeddedMode:
        """The mode of an agent's process on ``store``, in ``organisation`` (made when missing). Its undos run
        through the clients wrapped here and, for a session that wrapped none for a connector, through the
        organisation's stored settings (credentials read with the key the server and the command line use)."""
        engine = Engine(store, connectors=connectors)
        org_id = engine.ensure_organisation(organisation).org_id
        stored = SettingsUndoExecutor(engine, connectors, reader_of(secret_key_file(store.url)))
        clients = ClientUndoExecutor(connectors, stored)
        return cls(engine, org_id, clients, IntentChecks(engine, connectors), organisation=organisation)

    # the guard's port ---------------------------------------------------------------------------------
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

    def wait_for_decision(self, approval_id: str, timeout: float) -> ApprovalInfo:
        deadline = time.monotonic() + max(0.0, timeout)
        return outlasting(deadline, lambda: self._decision(approval_id, max(0.0, deadline - time.monotonic())))

    def _decision(self, approval_id: str, timeout: float) -> ApprovalInfo:
        decision = self.engine.get_approval(self.org_id, approval_id)
        ends_in = decision.time_remaining
        if decision.status is ApprovalStatus.PENDING and ends_in > 0:
            decision = self.engine.wait_for_decision(self.org_id, approval_id, min(timeout, ends_in))
        if decision.status is ApprovalStatus.PENDING and ends_in <= timeout:
            # Its time is up (no worker here expires it): expire it now, by the engine's rules, once the
            # clock the rules read has passed its end too.
            time.sleep(decision.time_remaining)
            self.engine.maintain()
            decision = self.engine.get_approval(self.org_id, approval_id)
        return decision

    def how_to_decide(self, approval_id: str) -> str:
        command = [
            "agentrein",
            "approvals",
            "approve",
            approval_id,
            "--database-url",
            shown_database_url(self.engine.store.url),
        ]
        if self.organisation != DEFAULT_ORGANISATION:
            command += ["--org", self.organisation]
        return f"approve it with `{shlex.join(command)}` (or `agentrein approvals reject …`)"

    def withdraw_approval(self, approval_id: str, reason: str) -> None:
        self.engine.withdraw(self.org_id, approval_id, reason)

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

    def fail_session(self, session_id: str, *, reason: str, connector: str | None) -> SessionInfo:
        return self.engine.fail_session(self.org_id, session_id, reason=reason, connector=connector)

    def settle_rollback(self, session_id: str, *, wait: float) -> SessionInfo:
        """Run the session's rollback here, through the wrapped clients; raises
        :class:`~agentrein_core.errors.UndoUnavailableError` when no client here can run an undo."""
        self._refuse_on_its_own_loop(session_id)
        approval_timeout = timedelta(seconds=wait or DEFAULT_APPROVAL_WAIT)

        def run(job: Rollback) -> Rollback:
            return self.engine.run_rollback(self.org_id, job.rollback_id, self.clients, approval_timeout)

        see_through(self, session_id, run, wait=wait, pause=LOOK_AGAIN)
        return self.engine.get_session(self.org_id, session_id)

    # sessions -----------------------------------------------------------------------------------------
    def new_session(self, agent_id: str, intent: str, sandbox: bool, session_id: str | None = None) -> SessionInfo:
        self._maintain_now_and_then()
        session = self.engine.new_session(self.org_id, agent_id, intent, sandbox, session_id=session_id)
        return self.engine.get_session(self.org_id, session.session_id)

    def get_session(self, session_id: str) -> SessionInfo:
        self._maintain_now_and_then()
        return self.engine.get_session(self.org_id, session_id)

    def list_sessions(self, limit: int) -> list[SessionSummary]:
        self._maintain_now_and_then()
        return self.engine.list_sessions(self.org_id, limit).sessions

    def complete_session(self, session_id: str) -> SessionInfo:
        return self.engine.complete_session(self.org_id, session_id)

    def request_rollback(self, session_id: str, *, trigger: str, approval_timeout: timedelta) -> Rollback:
        self._refuse_on_its_own_loop(session_id)
        return self.engine.request_rollback(
            self.org_id,
            session_id,
            caller_role=Role.OPERATOR,
            requested_by="sdk",
            trigger=trigger,
            approval_timeout=approval_timeout,
        )

    def active_rollback(self, session_id: str) -> Rollback | None:
        return self.engine.active_rollback(self.org_id, session_id)

    def session_approvals(self, session_id: str) -> list[Approval]:
        return self.engine.get_session(self.org_id, session_id).approvals

    # approvals ----------------------------------------------------------------------------------------
    def get_approval(self, approval_id: str) -> ApprovalInfo:
        return self.engine.get_approval(self.org_id, approval_id)

    def list_approvals(self, status: ApprovalStatus | None) -> list[ApprovalInfo]:
        self._maintain_now_and_then()
        return self.engine.list_approvals(self.org_id, status)

    def decide(
        self, approval_id: str, status: ApprovalStatus, reviewer: str | None, reason: str | None
    ) -> ApprovalInfo:
        """A decision may start or resume a rollback (an after-execution rejection, an approved undo): run it
        here when this process holds the session's clients (a waiting agent thread may also)."""
        if reviewer is None:
            raise ValidationError("reviewer", "name who decides (embedded mode has no API key to name them by)")
        decide = self.engine.approve if status is ApprovalStatus.APPROVED else self.engine.reject
        decided = decide(self.org_id, approval_id, reviewer, reason)
        if self.clients.knows_session(decided.session_id):
            try:
                self.settle_rollback(decided.session_id, wait=0)
            except AgentReinError:
                log.exception("AgentRein could not go on rolling back session %s", decided.session_id)
        return self.engine.get_approval(self.org_id, approval_id)

    # policies -----------------------------------------------------------------------------------------
    def add_policy(
        self,
        name: str,
        effect: PolicyEffect | str,
        *,
        connector: str | None,
        api_name: str | None,
        agent_id: str | None,
        operation_type: str | None,
        before_execution: bool,
        approval_timeout_ms: int | None,
    ) -> Policy:
        return self.engine.add_policy(
            self.org_id,
            name,
            effect,
            connector=connector,
            api_name=api_name,
            agent_id=agent_id,
            operation_type=operation_type,
            before_execution=before_execution,
            approval_timeout_ms=approval_timeout_ms,
        )

    def list_policies(self) -> list[Policy]:
        return self.engine.list_policies(self.org_id)

    def set_policy_enabled(self, policy_id: str, enabled: bool) -> Policy:
        return self.engine.set_policy_enabled(self.org_id, policy_id, enabled)

    def remove_policy(self, policy_id: str) -> None:
        self.engine.delete_policy(self.org_id, policy_id)

    def close(self) -> None:
        if self._checks is not None:
            self._checks.stop()
        self.engine.store.close()

    def _refuse_on_its_own_loop(self, session_id: str) -> None:
        """Refused before anything starts (and so before any undo could be marked failed): a synchronous
        rollback on the thread of an async client's event loop would block the loop its inverses need."""
        if self.clients.on_this_threads_loop(session_id):
            raise UndoUnavailableError(
                f"session {session_id} has an async client on the event loop of this thread, which a synchronous "
                "rollback would block; call `await asyncio.to_thread(ar.rollback_session, session)` instead"
            )

    # what a server's workers would do -----------------------------------------------------------------
    def _maintain_now_and_then(self) -> None:
        """Expire approvals, abandon idle sessions and resume rollbacks of sessions wrapped here, lazily, at
        most every ``MAINTENANCE_EVERY`` seconds."""
        now = time.monotonic()
        with self._lock:
            if now - self._last_maintenance < MAINTENANCE_EVERY:
                return
            self._last_maintenance = now
        try:
            self.engine.maintain()
        except AgentReinError as exc:
            log.warning("AgentRein maintenance stopped: %s", exc)
            return
        self._resume()

    def _resume(self) -> None:
        """Run the rollbacks left to run (a crash's, one drift started) of sessions wrapped in this process."""
        try:
            for job in self.engine.rollbacks_to_run(self.org_id):
                if self.clients.knows_session(job.session_id):
                    self.engine.run_rollback(
                        self.org_id, job.rollback_id, self.clients, timedelta(seconds=DEFAULT_APPROVAL_WAIT)
                    )
        except AgentReinError as exc:
            log.warning("AgentRein could not resume rollbacks: %s", exc)

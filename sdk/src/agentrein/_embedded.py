"""Embedded mode: the engine runs in this process, on the database given to it (no server).

Everything a server's workers would do is done here by the core's supervisor
(:class:`~agentrein_core.supervisor.Supervisor`), in daemon threads of this process (one per duty): the undos of a
rollback run through the clients wrapped in this process, or the organisation's stored connector settings
where it wrapped none (:class:`~agentrein._executor.ClientUndoExecutor`), approvals past their time are
expired, idle sessions abandoned and intent checks run. The agent's calls only wait for what it does. The
embedded caller owns its database, so it has an operator's rights (it may, for instance, roll back a session
it already completed).
"""

from __future__ import annotations

import logging
import shlex
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from agentrein._executor import ClientUndoExecutor
from agentrein._waiting import after_decision, outlasting, until_rollback_ends
from agentrein_core.commands import Confirmed, ExecutedCall, Failed, NewPolicy, WriteAhead
from agentrein_core.database import shown_database_url
from agentrein_core.engine import DEFAULT_ORGANISATION, Engine
from agentrein_core.errors import AgentReinError, UndoUnavailableError, ValidationError
from agentrein_core.model import Action, Approval, Policy, Rollback
from agentrein_core.plugins import Connectors
from agentrein_core.read_models import ApprovalInfo, LoggedAction, SessionInfo, SessionSummary
from agentrein_core.settings_undo import SettingsUndoExecutor
from agentrein_core.statuses import ApprovalStatus, Role
from agentrein_core.store import Store
from agentrein_core.supervisor import EMBEDDED, Supervisor
from agentrein_core.vault import reader_of, secret_key_file
from agentrein_core.verifier_plugins import IntentChecks

log = logging.getLogger("agentrein")

#: How often a caller waiting for a rollback looks whether this process's supervisor found it cannot run it.
LOOK_AGAIN = 0.5
#: How long closing the client waits for its supervisor's work in progress (an inverse or a verifier call
#: may take longer: it is then left to finish, and its job is taken again by the next process).
STOP_WAIT = 2.0


class EmbeddedMode:
    """The engine's use cases in one organisation, undoing through ``clients``. ``supervised``: the core's
    supervisor runs the organisation's background duties in a daemon thread (with ``intent_checks``, its
    intent checks too), taking the rollbacks of the sessions ``clients`` wrapped or a caller here waits for.
    An agent's process opens it with :meth:`for_agent`; the command line makes one with no supervisor, on a
    database it opened."""

    def __init__(
        self,
        engine: Engine,
        org_id: str,
        clients: ClientUndoExecutor,
        intent_checks: IntentChecks | None = None,
        *,
        organisation: str = DEFAULT_ORGANISATION,
        supervised: bool = False,
    ) -> None:
        self.engine = engine
        self.org_id = org_id
        #: The organisation's name, as the command line takes it (``--org``).
        self.organisation = organisation
        self.identity = f"{engine.store.url} organisation {org_id}"
        self.clients = clients
        #: Sessions whose rollback a caller here waits for: run here even when no client here wrapped them,
        #: so that the caller learns what this process cannot undo.
        self._awaited: Counter[str] = Counter()
        self._lock = threading.Lock()
        self.supervisor: Supervisor | None = None
        if supervised:
            self.supervisor = Supervisor(
                engine,
                clients,
                schedule=EMBEDDED,
                org_id=org_id,
                runs=self._runs_here,
                rollback_threads=1,  # a thread per duty: a slow verifier call holds up no expiry or undo
                checks=intent_checks,
            )
            clients.learned = self.supervisor.look_again
            self.supervisor.start()

    @classmethod
    def for_agent(cls, store: Store, organisation: str, connectors: Connectors) -> EmbeddedMode:
        """The mode of an agent's process on ``store``, in ``organisation`` (made when missing). Its undos run
        through the clients wrapped here and, for a session that wrapped none for a connector, through the
        organisation's stored settings (credentials read with the key the server and the command line use)."""
        engine = Engine(store, connectors=connectors)
        org_id = engine.accounts.ensure_organisation(organisation).org_id
        stored = SettingsUndoExecutor(engine, connectors, reader_of(secret_key_file(store.url)))
        clients = ClientUndoExecutor(connectors, stored)
        checks = IntentChecks(engine, connectors)
        return cls(engine, org_id, clients, checks, organisation=organisation, supervised=True)

    # the guard's port ---------------------------------------------------------------------------------
    def log_action(self, session_id: str, call: WriteAhead) -> LoggedAction:
        # The guard redacted the payload with the connector's own redactor: the engine does not do it again.
        return self.engine.recording.log_action(self.org_id, session_id, call, redacted=True)

    def wait_for_decision(self, approval_id: str, timeout: float) -> ApprovalInfo:
        """Until the approval is decided, or expired by the supervisor at its end, at most ``timeout`` s."""
        deadline = time.monotonic() + max(0.0, timeout)
        return outlasting(
            deadline,
            lambda: self.engine.reviews.wait_for_decision(
                self.org_id, approval_id, max(0.0, deadline - time.monotonic())
            ),
        )

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
        self.engine.reviews.withdraw(self.org_id, approval_id, reason)

    def confirm_action(self, session_id: str, action_id: str, confirmed: Confirmed) -> Action:
        # Redacted, and its undo checked by its connector, by the guard (or so written to the journal by one).
        recording = self.engine.recording
        return recording.confirm_action(self.org_id, action_id, confirmed, session_id=session_id, redacted=True)

    def fail_action(self, session_id: str, action_id: str, failed: Failed) -> Action:
        return self.engine.recording.fail_action(self.org_id, action_id, failed, session_id=session_id)

    def record_executed_action(self, session_id: str, call: ExecutedCall) -> Action:
        return self.engine.recording.record_executed_action(self.org_id, session_id, call)

    def fail_session(self, session_id: str, *, reason: str, connector: str | None) -> SessionInfo:
        return self.engine.recording.fail_session(self.org_id, session_id, reason=reason, connector=connector)

    def follow_rollback(self, session_id: str, *, wait: float) -> SessionInfo:
        """Wait while this process's supervisor runs the session's rollback through the wrapped clients;
        raises :class:`~agentrein_core.errors.UndoUnavailableError` when no client here can run an undo."""
        self._refuse_on_its_own_loop(session_id)
        with self._awaiting(session_id):
            until_rollback_ends(self, session_id, self._while_running, wait=wait)
        return self.engine.recording.get_session(self.org_id, session_id)

    # sessions -----------------------------------------------------------------------------------------
    def new_session(self, agent_id: str, intent: str, sandbox: bool, session_id: str | None = None) -> SessionInfo:
        session = self.engine.recording.new_session(self.org_id, agent_id, intent, sandbox, session_id=session_id)
        return self.engine.recording.get_session(self.org_id, session.session_id)

    def get_session(self, session_id: str) -> SessionInfo:
        return self.engine.recording.get_session(self.org_id, session_id)

    def list_sessions(self, limit: int) -> list[SessionSummary]:
        return self.engine.recording.list_sessions(self.org_id, limit).sessions

    def complete_session(self, session_id: str) -> SessionInfo:
        return self.engine.recording.complete_session(self.org_id, session_id)

    def request_rollback(self, session_id: str, *, trigger: str, approval_timeout: timedelta) -> Rollback:
        self._refuse_on_its_own_loop(session_id)
        return self.engine.rollbacks.request_rollback(
            self.org_id,
            session_id,
            caller_role=Role.OPERATOR,
            requested_by="sdk",
            trigger=trigger,
            approval_timeout=approval_timeout,
        )

    def active_rollback(self, session_id: str) -> Rollback | None:
        return self.engine.rollbacks.active_rollback(self.org_id, session_id)

    def session_approvals(self, session_id: str) -> list[Approval]:
        return self.engine.recording.get_session(self.org_id, session_id).approvals

    # approvals ----------------------------------------------------------------------------------------
    def get_approval(self, approval_id: str) -> ApprovalInfo:
        return self.engine.reviews.get_approval(self.org_id, approval_id)

    def list_approvals(self, status: ApprovalStatus | None) -> list[ApprovalInfo]:
        return self.engine.reviews.list_approvals(self.org_id, status)

    def decide(
        self, approval_id: str, status: ApprovalStatus, reviewer: str | None, reason: str | None
    ) -> ApprovalInfo:
        """A decision may start or resume a rollback (an after-execution rejection, an approved undo): when
        this process holds the session's clients, its supervisor runs it, and the decision returns once it
        has moved as far as it can (problems are logged: the decision was made)."""
        if reviewer is None:
            raise ValidationError("reviewer", "name who decides (embedded mode has no API key to name them by)")
        decide = self.engine.reviews.approve if status is ApprovalStatus.APPROVED else self.engine.reviews.reject
        decided = decide(self.org_id, approval_id, reviewer, reason)
        if self.supervisor is not None and self.clients.knows_session(decided.session_id):
            try:
                self._refuse_on_its_own_loop(decided.session_id)  # the supervisor's inverses need that loop
                after_decision(self, decided.session_id, self._while_running)
            except AgentReinError:
                log.exception("AgentRein could not go on rolling back session %s", decided.session_id)
        return self.engine.reviews.get_approval(self.org_id, approval_id)

    # policies -----------------------------------------------------------------------------------------
    def add_policy(self, policy: NewPolicy) -> Policy:
        return self.engine.policies.add_policy(self.org_id, policy)

    def list_policies(self) -> list[Policy]:
        return self.engine.policies.list_policies(self.org_id)

    def set_policy_enabled(self, policy_id: str, enabled: bool) -> Policy:
        return self.engine.policies.set_policy_enabled(self.org_id, policy_id, enabled)

    def remove_policy(self, policy_id: str) -> None:
        self.engine.policies.delete_policy(self.org_id, policy_id)

    def close(self) -> None:
        if self.supervisor is not None:
            self.supervisor.stop(STOP_WAIT)
        self.engine.store.close()

    def _refuse_on_its_own_loop(self, session_id: str) -> None:
        """Refused before anything starts (and so before any undo could be marked failed): a synchronous
        rollback on the thread of an async client's event loop would block the loop its inverses need."""
        if self.clients.on_this_threads_loop(session_id):
            raise UndoUnavailableError(
                f"session {session_id} has an async client on the event loop of this thread, which a synchronous "
                "rollback would block; call `await asyncio.to_thread(ar.rollback_session, session)` instead"
            )

    # waiting while the supervisor works ---------------------------------------------------------------
    def _runs_here(self, session_id: str) -> bool:
        """Whether this process's supervisor takes the session's rollback: a client here wrapped it, or a
        caller here waits for it (it then learns what cannot be undone here)."""
        with self._lock:
            awaited = self._awaited[session_id] > 0
        return awaited or self.clients.knows_session(session_id)

    @contextmanager
    def _awaiting(self, session_id: str) -> Iterator[None]:
        with self._lock:
            self._awaited[session_id] += 1
        if self.supervisor is not None:
            self.supervisor.look_again(session_id)
        try:
            yield
        finally:
            with self._lock:
                self._awaited[session_id] -= 1
                if self._awaited[session_id] <= 0:
                    del self._awaited[session_id]

    def _while_running(self, job: Rollback) -> Rollback:
        """The job once it has ended or paused, or as it stands after ``LOOK_AGAIN``; raises what kept this
        process's supervisor from running it."""
        self._raise_unavailable(job.session_id)
        moved = self.engine.rollbacks.wait_for_rollback(self.org_id, job.session_id, LOOK_AGAIN) or job
        self._raise_unavailable(job.session_id)
        return moved

    def _raise_unavailable(self, session_id: str) -> None:
        unavailable = self.supervisor.unavailable(session_id) if self.supervisor is not None else None
        if unavailable is not None:
            raise unavailable

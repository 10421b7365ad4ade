"""``AgentRein``: the object an agent holds. It opens sessions, wraps clients, and answers for them."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import Any, TypeVar

from agentrein.backend import Backend, LocalBackend
from agentrein.checks import BackgroundChecks
from agentrein.executor import ClientRef, ClientUndoExecutor
from agentrein.guard import Guard
from agentrein.journal import Journal
from agentrein.options import WrapOptions
from agentrein.proxy import WrappedClient
from agentrein.remote import API_KEY_ENV, URL_ENV, RemoteBackend
from agentrein.runtime import DEFAULT_POLL_INTERVAL, DEFAULT_TIMEOUT, Runtime, log
from agentrein_core.engine import DEFAULT_ORGANISATION, Engine
from agentrein_core.errors import AgentReinError, AgentReinUnavailableError, ValidationError
from agentrein_core.model import Policy
from agentrein_core.plugins import Connectors, installed_connectors
from agentrein_core.redaction import Redactor
from agentrein_core.statuses import ApprovalStatus, PolicyEffect
from agentrein_core.store import Store
from agentrein_core.verifiers import IntentChecks
from agentrein_core.views import ApprovalInfo, SessionInfo

T = TypeVar("T")
SessionRef = SessionInfo | str


class AgentRein:
    """AgentRein for one agent process, embedded or through a server; the API is the same.

    - Server mode: ``AgentRein(base_url="http://127.0.0.1:8000", api_key="ar_…")``, or ``$AGENTREIN_URL`` and
      ``$AGENTREIN_API_KEY``. The key decides the organisation and the role; rollbacks run in the server.
    - Embedded (no server): records go to the SQLite file ``./agentrein.db``, or to the database named by
      ``database_url`` or ``$AGENTREIN_DATABASE_URL`` (``postgresql+psycopg://…``), in ``organisation``.
    """

    def __init__(
        self,
        database_url: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        organisation: str = DEFAULT_ORGANISATION,
        connectors: Connectors | None = None,
        journal_path: str | os.PathLike[str] | None = None,
    ) -> None:
        self.organisation = organisation
        self._connectors = connectors or installed_connectors()
        self._store: Store | None = None
        self._remote: RemoteBackend | None = None
        base_url = base_url or (os.environ.get(URL_ENV) if database_url is None else None)
        if base_url:
            if database_url is not None:
                raise ValidationError("database_url", "give a database_url (embedded) or a base_url (server), not both")
            self._remote = RemoteBackend(base_url, api_key or os.environ.get(API_KEY_ENV, ""))
            self._backend: Backend = self._remote
        else:
            self._store = Store(database_url)
            engine = Engine(self._store, connectors=self._connectors)
            org = engine.ensure_organisation(organisation)
            local = self._backend = LocalBackend(engine, org.org_id)
        journal = Journal(self._backend.identity, journal_path)
        self._runtime = Runtime(self._backend, ClientUndoExecutor(self._connectors), journal)
        self._checks: BackgroundChecks | None = None
        if self._store is not None:  # embedded: intent checks run in a background thread of this process
            checks = IntentChecks(engine, self._connectors)
            self._checks = BackgroundChecks(checks, engine, local.org_id, self._runtime.resume_rollbacks)
            self._checks.poke()  # checks a process before this one left unasked

    @property
    def database_url(self) -> str | None:
        """Where the records go in embedded mode (``None`` in server mode)."""
        return self._store.url if self._store is not None else None

    @property
    def base_url(self) -> str | None:
        """The server, in server mode (``None`` when embedded)."""
        return self._remote.base_url if self._remote is not None else None

    # sessions -----------------------------------------------------------------------------------------
    def new_session(self, agent_id: str, intent: str = "", sandbox: bool = False) -> SessionInfo:
        """Open a session: the unit of work an agent's run is recorded, reviewed and rolled back in."""
        self._runtime.maintain_now_and_then()
        return self._backend.new_session(agent_id, intent, sandbox)

    def get_session(self, session: SessionRef) -> SessionInfo:
        self._runtime.maintain_now_and_then()
        return self._backend.get_session(_session_id(session))

    def list_sessions(self, limit: int = 100) -> list[SessionInfo]:
        """The organisation's sessions, newest first."""
        self._runtime.maintain_now_and_then()
        return self._backend.list_sessions(limit)

    def complete_session(self, session: SessionRef) -> SessionInfo:
        return self._backend.complete_session(_session_id(session))

    def rollback_session(self, session: SessionRef, *, timeout_ms: int | None = None) -> SessionInfo:
        """Undo the session's executed actions, last first, and return the session as it then stands.

        Waits until the rollback ends, including for any rollback approval, at most ``timeout_ms``
        (default 5 minutes); an undo that needs approval and is not decided by then is declined. Inverses run
        through the clients wrapped in this session; :class:`UndoUnavailableError` says which connector has
        none here."""
        session_id = _session_id(session)
        timeout = timeout_ms / 1000 if timeout_ms is not None else DEFAULT_TIMEOUT
        self._backend.request_rollback(
            session_id, requested_by="sdk", trigger="rollback_session()", approval_timeout=timedelta(seconds=timeout)
        )
        self._runtime.settle_rollback(session_id, wait=timeout, approval_timeout=timeout, poll_interval=0.5)
        return self._backend.get_session(session_id)

    # wrapping -----------------------------------------------------------------------------------------
    def wrap(
        self,
        client: T,
        session: SessionRef,
        *,
        connector: str,
        requires_approval: Iterable[str] = (),
        poll_interval_ms: int = 2000,
        timeout_ms: int = 300_000,
        retryable: Iterable[str] = (),
        failure_mode: str = "open",
        undo: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> T:
        """Return ``client`` guarded by AgentRein within ``session``; use it exactly as the client.

        ``requires_approval`` and ``retryable`` are globs over api names (``"DELETE *"``); ``undo`` maps api
        names (or globs) to undo configs that set or override the connector's, e.g.
        ``{"POST /v1/payouts": {"requireApproval": True}}``."""
        found = self._connectors.get(connector)
        if not found.accepts(client):
            raise ValidationError("client", f"connector {connector!r} cannot wrap a {type(client).__name__}")
        options = WrapOptions.build(
            found,
            requires_approval=requires_approval,
            retryable=retryable,
            poll_interval_ms=poll_interval_ms,
            timeout_ms=timeout_ms,
            failure_mode=failure_mode,
            undo=undo,
        )
        session_id = _session_id(session)
        try:
            self._backend.get_session(session_id)  # an unknown session is an error now, not at the first call
        except AgentReinUnavailableError as exc:
            if options.failure_mode == "closed":
                raise
            self._runtime.warn_unavailable(exc)  # checked when AgentRein is back, as the journal is replayed
        # This client can undo the session's actions of this connector, even ones made by another process.
        self._runtime.executor.remember_session(session_id, connector, ClientRef(client))
        guard = Guard(self._runtime, session_id, client, options, Redactor(found.sensitive_fields))
        return WrappedClient(client, guard)  # type: ignore[return-value]

    # approvals ----------------------------------------------------------------------------------------
    def list_approvals(self, status: ApprovalStatus | str | None = None) -> list[ApprovalInfo]:
        """Approval requests, pending first and oldest first; ``status`` filters."""
        self._runtime.maintain_now_and_then()
        return self._backend.list_approvals(_approval_status(status))

    def get_approval(self, approval_id: str) -> ApprovalInfo:
        return self._backend.get_approval(approval_id)

    def approve(self, approval_id: str, reviewer: str | None = None, reason: str | None = None) -> ApprovalInfo:
        """Approve a pending request as ``reviewer`` (through a server, the API key is recorded too, and names
        the reviewer when none is given)."""
        decided = self._backend.approve(approval_id, reviewer, reason)
        self._resume_rollback(decided)
        return decided

    def reject(self, approval_id: str, reviewer: str | None = None, reason: str | None = None) -> ApprovalInfo:
        """Reject a pending request; ``reason`` reaches the agent (``ApprovalRejectedError.reason``)."""
        decided = self._backend.reject(approval_id, reviewer, reason)
        self._resume_rollback(decided)
        return decided

    def _resume_rollback(self, decided: ApprovalInfo) -> None:
        """A decision may start or resume a rollback (an after-execution rejection, an approved undo). In
        embedded mode run it here when this process holds the session's clients (a waiting agent thread may
        also); in server mode wait for the server to run it, so the decision returns with its outcome."""
        if not self._backend.runs_undos:
            self._runtime.follow_server_rollback(decided.session_id, wait=DEFAULT_TIMEOUT)
        elif self._runtime.executor.knows_session(decided.session_id):
            self._runtime.settle_rollback_quietly(
                decided.session_id, wait=0, approval_timeout=DEFAULT_TIMEOUT, poll_interval=DEFAULT_POLL_INTERVAL
            )

    # policies -----------------------------------------------------------------------------------------
    def add_policy(
        self,
        name: str,
        effect: PolicyEffect | str,
        *,
        connector: str | None = None,
        api_name: str | None = None,
        agent_id: str | None = None,
        operation_type: str | None = None,
    ) -> Policy:
        """Add an organisation rule; each given glob must match for it to apply (strictest match wins)."""
        return self._backend.add_policy(
            name,
            effect,
            connector=connector,
            api_name=api_name,
            agent_id=agent_id,
            operation_type=operation_type,
        )

    def list_policies(self) -> list[Policy]:
        return self._backend.list_policies()

    def set_policy_enabled(self, policy_id: str, enabled: bool) -> Policy:
        """Switch a policy off (it no longer applies) or back on."""
        return self._backend.set_policy_enabled(policy_id, enabled)

    def remove_policy(self, policy_id: str) -> None:
        self._backend.remove_policy(policy_id)

    def close(self) -> None:
        """Replay what is still journaled (if AgentRein answers), then let go of connections."""
        try:
            self._runtime.replay_journal()
        except AgentReinError as exc:
            log.warning("AgentRein journal not replayed at close: %s", exc)
        if self._checks is not None:
            self._checks.stop()
        if self._store is not None:
            self._store.close()
        if self._remote is not None:
            self._remote.close()

    def __enter__(self) -> AgentRein:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _session_id(session: SessionRef) -> str:
    if isinstance(session, SessionInfo):
        return session.id
    if isinstance(session, str) and session:
        return session
    raise ValidationError("session", f"expected a session or its id, not {session!r}")


def _approval_status(status: ApprovalStatus | str | None) -> ApprovalStatus | None:
    if status is None:
        return None
    try:
        return ApprovalStatus(status)
    except ValueError:
        allowed = ", ".join(s.value for s in ApprovalStatus)
        raise ValidationError("status", f"{status!r} is not an approval status ({allowed})") from None

"""``AgentRein``: the object an agent holds. It opens sessions, wraps clients, and answers for them."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar, cast

from agentrein._errors import RollbackFailedError
from agentrein._executor import ClientRef, ClientUndoExecutor
from agentrein._guard import Guard
from agentrein._http import API_KEY_ENV, URL_ENV
from agentrein._options import WrapOptions, checked_failure_mode
from agentrein._outbox import Outbox
from agentrein._outbox_file import RollbackRequested
from agentrein._port import Mode
from agentrein._proxy import WrappedClient
from agentrein._served import ServedMode
from agentrein._undo_taker import UndoTaker
from agentrein_core.commands import NewPolicy
from agentrein_core.errors import AgentReinError, AgentReinUnavailableError, ValidationError
from agentrein_core.model import DEFAULT_ORGANISATION, Policy
from agentrein_core.plugins import Connectors, installed_connectors
from agentrein_core.read_models import ApprovalInfo, SessionInfo, SessionSummary
from agentrein_core.redaction import AGENTREIN_LOGGERS, Redactor, redact_logs
from agentrein_core.statuses import ApprovalStatus, PolicyEffect

if TYPE_CHECKING:
    from agentrein._embedded import EmbeddedMode

T = TypeVar("T")
SessionRef = SessionSummary | str  # a session read whole (SessionInfo) or listed, or its id
log = logging.getLogger("agentrein")
#: How long ``rollback_session`` waits by default, for the rollback and any rollback approval in it.
DEFAULT_TIMEOUT = 300.0


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
        # AgentRein's own log lines name api names and errors, which may hold what the store never keeps.
        self._redactor = Redactor(self._connectors.every_sensitive_field())
        redact_logs(self._redactor, AGENTREIN_LOGGERS)
        base_url = base_url or (os.environ.get(URL_ENV) if database_url is None else None)
        if base_url and database_url is not None:
            raise ValidationError("database_url", "give a database_url (embedded) or a base_url (server), not both")
        self._mode: Mode
        # self._clients: the clients wrapped in this process, by session and connector; embedded rollbacks run
        # through them.
        if base_url:
            served = ServedMode(base_url, api_key or os.environ.get(API_KEY_ENV, ""), journal_path=journal_path)
            self._mode, self._outbox = served, served.outbox  # one outbox: its confirmations travel there too
            # The server runs the undos but those it cannot reach (no server side, an MCP server not in its
            # settings): it hands those back here.
            self._clients = ClientUndoExecutor(self._connectors)
            self._undo_taker: UndoTaker | None = UndoTaker(served, self._clients, self._redactor)
        else:
            embedded = _embedded(database_url, organisation, self._connectors)
            self._mode, self._clients = embedded, embedded.clients
            self._undo_taker = None
            self._outbox = Outbox(embedded.identity, journal_path, recorder=embedded)

    @property
    def database_url(self) -> str | None:
        """Where the records go in embedded mode (``None`` in server mode)."""
        if isinstance(self._mode, ServedMode):
            return None
        from agentrein._embedded import EmbeddedMode  # loaded already: this is embedded mode

        assert isinstance(self._mode, EmbeddedMode)
        return self._mode.engine.store.url

    @property
    def base_url(self) -> str | None:
        """The server, in server mode (``None`` when embedded)."""
        return self._mode.base_url if isinstance(self._mode, ServedMode) else None

    # sessions -----------------------------------------------------------------------------------------
    def new_session(
        self, agent_id: str, intent: str = "", sandbox: bool = False, *, failure_mode: str = "open"
    ) -> SessionInfo:
        """Open a session: the unit of work an agent's run is recorded, reviewed and rolled back in.

        When AgentRein cannot be reached, ``failure_mode="open"`` (the default, as for :meth:`wrap`) opens it
        here, with a warning: it gets an id of AgentRein's shape chosen here, and its creation is journaled
        and replayed once AgentRein answers, before its calls (which are journaled too) and its completion.
        ``"closed"`` raises :class:`AgentReinUnavailableError`."""
        mode = checked_failure_mode(failure_mode)
        try:
            self._outbox.replay()  # what is journaled reaches AgentRein before anything newer
            return self._mode.new_session(agent_id, intent, sandbox)
        except AgentReinUnavailableError as exc:
            if mode == "closed":
                raise
            self._outbox.warn_unavailable(exc, stacklevel=3)
            # Redacted as AgentRein would store them: the journal is on disk.
            redact = self._redactor.redact_text
            return self._outbox.open_session(redact(agent_id), redact(intent), sandbox)

    def get_session(self, session: SessionRef) -> SessionInfo:
        """The session as AgentRein holds it. While AgentRein cannot be reached this raises
        :class:`AgentReinUnavailableError`, for a session opened meanwhile too: only AgentRein can say what
        its policies and reviewers made of the calls."""
        session_id = _session_id(session)
        self._outbox.replay()
        return self._mode.get_session(session_id)

    def list_sessions(self, limit: int = 100) -> list[SessionSummary]:
        """The organisation's sessions, newest first, each with its display status and action count; pass one
        to :meth:`get_session` for its actions."""
        self._outbox.replay()
        return self._mode.list_sessions(limit)

    def complete_session(self, session: SessionRef) -> SessionInfo:
        """The agent is done. A session opened while AgentRein could not be reached, of which AgentRein has not
        learnt yet, is completed in the journal when AgentRein still cannot be reached (after its calls; made
        when the journal is replayed): the session is returned as it stands here. Any other session needs
        AgentRein (:class:`AgentReinUnavailableError` otherwise)."""
        session_id = _session_id(session)
        try:
            self._outbox.replay()
            completed = self._mode.complete_session(session_id)
        except AgentReinUnavailableError as exc:
            offline = self._outbox.complete_offline(session_id)
            if offline is None:
                raise
            self._outbox.warn_unavailable(exc, stacklevel=3)
            return offline
        self._clients.forget_if_ended(completed)
        return completed

    def rollback_session(self, session: SessionRef, *, timeout_ms: int | None = None) -> SessionInfo:
        """Undo the session's executed actions, last first, and return the session as it then stands.

        Waits until the rollback ends, including for any rollback approval, at most ``timeout_ms``
        (default 5 minutes); an undo that needs approval and is not decided by then is declined. Inverses run
        through the clients wrapped in this session; :class:`UndoUnavailableError` says which connector has
        none here. An undo that fails stops the chain and raises :class:`RollbackFailedError`, which carries
        the session as it then stands and the action whose undo failed.

        When AgentRein cannot be reached the rollback cannot run: the request is journaled, made as soon as
        AgentRein answers (at this client's next dealing with it, or its :meth:`close`), and
        :class:`AgentReinUnavailableError` says so."""
        session_id = _session_id(session)
        timeout = timeout_ms / 1000 if timeout_ms is not None else DEFAULT_TIMEOUT
        approval_timeout = timedelta(seconds=timeout)
        trigger = "rollback_session()"
        try:
            self._outbox.replay()
            self._mode.request_rollback(session_id, trigger=trigger, approval_timeout=approval_timeout)
        except AgentReinUnavailableError as exc:
            self._outbox.append(RollbackRequested(session_id, trigger, max(1, round(timeout * 1000))))
            raise AgentReinUnavailableError(
                f"{exc}; the rollback of session {session_id} is journaled in {self._outbox.path} and requested "
                "as soon as AgentRein answers"
            ) from exc
        session_now = self._mode.follow_rollback(session_id, wait=timeout)
        self._clients.forget_if_ended(session_now)
        failure = RollbackFailedError.of(session_now)
        if failure is not None:
            raise failure
        return session_now

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
        undo: Mapping[str, Any] | str | os.PathLike[str] | None = None,
        **connector_options: Any,
    ) -> T:
        """Return ``client`` guarded by AgentRein within ``session``; use it exactly as the client.

        ``requires_approval`` and ``retryable`` are globs over api names (``"DELETE *"``); ``undo`` maps api
        names (or globs) to undo configs that set or override the connector's, e.g.
        ``{"POST /v1/payouts": {"requireApproval": True}}`` (for the ``mcp`` connector: its undo table, or the
        path of one). Any other keyword is the connector's own (``server=`` for ``mcp``)."""
        found = self._connectors.get(connector)
        if not found.accepts(client):
            raise ValidationError("client", f"connector {connector!r} cannot wrap a {type(client).__name__}")
        own = {"undo": undo} if "undo" in found.wrap_options and undo is not None else {}
        for name in connector_options:
            if name not in found.wrap_options:
                raise ValidationError(name, f"wrap() takes no option {name!r} for connector {connector!r}")
        bound = found.bind(client, {**own, **connector_options})
        if isinstance(undo, str | os.PathLike) and not own:
            raise ValidationError("undo", f"connector {connector!r} takes undo overrides by api name, not a file")
        options = WrapOptions.build(
            found,
            requires_approval=requires_approval,
            retryable=retryable,
            poll_interval_ms=poll_interval_ms,
            timeout_ms=timeout_ms,
            failure_mode=failure_mode,
            undo=None if own or undo is None else cast(Mapping[str, Mapping[str, Any]], undo),
        )
        session_id = _session_id(session)
        try:
            self._outbox.replay()  # a session opened while AgentRein was unreachable is made first
            self._mode.get_session(session_id)  # an unknown session is an error now, not at the first call
        except AgentReinUnavailableError as exc:
            if options.failure_mode == "closed":
                raise
            self._outbox.warn_unavailable(exc)  # checked when AgentRein is back, as the journal is replayed
        # This client can undo the session's actions of this connector, even ones made by another process.
        self._clients.remember_session(session_id, connector, ClientRef(bound))
        if self._undo_taker is not None:
            self._undo_taker.wrapped(found)
        redactor = Redactor(found.sensitive_fields)
        guard = Guard(self._mode, self._outbox, self._clients, session_id, bound, options, redactor)
        return WrappedClient(client, guard)  # type: ignore[return-value]

    # approvals ----------------------------------------------------------------------------------------
    def list_approvals(self, status: ApprovalStatus | str | None = None) -> list[ApprovalInfo]:
        """Approval requests, pending first and oldest first; ``status`` filters."""
        return self._mode.list_approvals(_approval_status(status))

    def get_approval(self, approval_id: str) -> ApprovalInfo:
        return self._mode.get_approval(approval_id)

    def approve(self, approval_id: str, reviewer: str | None = None, reason: str | None = None) -> ApprovalInfo:
        """Approve a pending request as ``reviewer`` (through a server, the API key is recorded too, and names
        the reviewer when none is given). Returns once a rollback the decision resumes has moved as far as it
        can (it runs here, embedded, when this process holds the session's clients)."""
        return self._mode.decide(approval_id, ApprovalStatus.APPROVED, reviewer, reason)

    def reject(self, approval_id: str, reviewer: str | None = None, reason: str | None = None) -> ApprovalInfo:
        """Reject a pending request; ``reason`` reaches the agent (``ApprovalRejectedError.reason``). Returns
        once a rollback the rejection starts has moved as far as it can, as :meth:`approve` does."""
        return self._mode.decide(approval_id, ApprovalStatus.REJECTED, reviewer, reason)

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
        before_execution: bool = False,
        approval_timeout_ms: int | None = None,
    ) -> Policy:
        """Add an organisation rule; each given glob must match for it to apply (strictest match wins).

        A ``REQUIRE_APPROVAL`` rule lets a matching call run and then asks a reviewer to look at it (a
        rejection undoes it); with ``before_execution=True`` it holds the call until a reviewer approves it,
        for every agent whatever its code declares, waiting ``approval_timeout_ms`` (else the wrap's
        ``timeout_ms``)."""
        return self._mode.add_policy(
            NewPolicy(
                name,
                effect,
                connector=connector,
                api_name=api_name,
                agent_id=agent_id,
                operation_type=operation_type,
                before_execution=before_execution,
                approval_timeout_ms=approval_timeout_ms,
            )
        )

    def list_policies(self) -> list[Policy]:
        return self._mode.list_policies()

    def set_policy_enabled(self, policy_id: str, enabled: bool) -> Policy:
        """Switch a policy off (it no longer applies) or back on."""
        return self._mode.set_policy_enabled(policy_id, enabled)

    def remove_policy(self, policy_id: str) -> None:
        self._mode.remove_policy(policy_id)

    def close(self) -> None:
        """Replay what is still journaled (if AgentRein answers), then let go of connections."""
        try:
            self._outbox.replay()
        except AgentReinError as exc:
            log.warning("AgentRein journal not replayed at close: %s", exc)
        if self._undo_taker is not None:
            self._undo_taker.close()
        self._outbox.close()  # before the mode it sends to (a served mode closes it again: that does nothing)
        self._mode.close()

    def __enter__(self) -> AgentRein:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _embedded(database_url: str | None, organisation: str, connectors: Connectors) -> EmbeddedMode:
    """Embedded mode, imported only when it is used: an agent of a server never loads the engine's database
    layer (SQLAlchemy and the rest)."""
    from agentrein._embedded import EmbeddedMode
    from agentrein_core.store import Store

    return EmbeddedMode.for_agent(Store(database_url), organisation, connectors)


def _session_id(session: SessionRef) -> str:
    if isinstance(session, SessionSummary):
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

"""What the SDK needs of AgentRein, in the two sizes its parts need it.

:class:`Recorder` is the guard's port: the few steps a guarded call takes (record it before it runs, wait for
a reviewer, confirm or fail it, report a call that ran while AgentRein was unreachable, report that a call
could not be recorded, see the session's rollback through), and what the journal replays besides (a session
opened, completed or rolled back while AgentRein was unreachable). :class:`Mode` is everything
:class:`~agentrein.AgentRein` offers on top. Each has two implementations, the modes:
:class:`~agentrein._embedded.EmbeddedMode` (the engine in this process, which runs the undos through the
wrapped clients) and :class:`~agentrein._served.ServedMode` (a server over HTTP, whose workers run them); who
drives a rollback is the mode's own business, so neither needs a stub of the other's.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Protocol

from agentrein_core.commands import Confirmed, ExecutedCall, Failed, NewPolicy, WriteAhead
from agentrein_core.model import Action, Policy, Rollback
from agentrein_core.read_models import ApprovalInfo, LoggedAction, SessionInfo, SessionSummary
from agentrein_core.statuses import ApprovalStatus


class Recorder(Protocol):
    """What a guarded call needs (:mod:`agentrein._guard`), and what the journal replays through."""

    #: Whose records these are (a database and organisation, or a server and key): the journal replays an
    #: entry only to the recorder that journaled it.
    identity: str

    def log_action(self, session_id: str, call: WriteAhead) -> LoggedAction: ...

    def wait_for_decision(self, approval_id: str, timeout: float) -> ApprovalInfo:
        """The approval once decided, or as it stands after ``timeout`` seconds. One past its time is
        expired by whoever runs the expiries, with what an expiry means: embedded, this call does it at once;
        a server's maintenance does it within a second. AgentRein out of reach (a server restarting, a
        database locked) is waited out, reconnecting with backoff: :class:`AgentReinUnavailableError` only
        once ``timeout`` is (nearly) up."""
        ...

    def how_to_decide(self, approval_id: str) -> str:
        """Where a person decides the request: the server's dashboard, or the command line on this database."""
        ...

    def withdraw_approval(self, approval_id: str, reason: str) -> None:
        """Nobody waits for this before-execution request any more: close it, its action ``FAILED``."""
        ...

    def confirm_action(self, session_id: str, action_id: str, confirmed: Confirmed) -> Action | None:
        """The call succeeded: ``CLEARED -> SUCCESS``. Embedded, at once (the action as stored); through a
        server, with the session's next request or within moments (``None``: see
        :mod:`agentrein._outbox`)."""
        ...

    def fail_action(self, session_id: str, action_id: str, failed: Failed) -> Action: ...

    def record_executed_action(self, session_id: str, call: ExecutedCall) -> Action: ...

    def fail_session(self, session_id: str, *, reason: str, connector: str | None) -> SessionInfo:
        """Action logging failed (a call could not be recorded): roll the session back as a failed call does,
        while it is ``ACTIVE``. The caller then sees the rollback through (:meth:`follow_rollback`)."""
        ...

    def new_session(self, agent_id: str, intent: str, sandbox: bool, session_id: str | None = None) -> SessionInfo:
        """Open a session; ``session_id`` is the id of one opened while AgentRein was unreachable (its
        creation replayed from the journal: accepted once, the same creation again returns it)."""
        ...

    def complete_session(self, session_id: str) -> SessionInfo: ...
    def request_rollback(self, session_id: str, *, trigger: str, approval_timeout: timedelta) -> Rollback: ...

    def follow_rollback(self, session_id: str, *, wait: float) -> SessionInfo:
        """See the session's rollback (if any) through, waiting at most ``wait`` seconds: until it has ended,
        or until it waits for a reviewer who has not decided in time. Returns the session as it then stands."""
        ...


class Mode(Recorder, Protocol):
    """What :class:`~agentrein.AgentRein` needs besides: sessions, approvals, policies, rollbacks."""

    def get_session(self, session_id: str) -> SessionInfo: ...
    def list_sessions(self, limit: int) -> list[SessionSummary]: ...
    def get_approval(self, approval_id: str) -> ApprovalInfo: ...
    def list_approvals(self, status: ApprovalStatus | None) -> list[ApprovalInfo]: ...
    def decide(
        self, approval_id: str, status: ApprovalStatus, reviewer: str | None, reason: str | None
    ) -> ApprovalInfo:
        """Approve or reject; returns once a rollback the decision starts or resumes has moved as far as it
        can here (it may wait for another reviewer)."""
        ...

    def add_policy(self, policy: NewPolicy) -> Policy: ...
    def list_policies(self) -> list[Policy]: ...
    def set_policy_enabled(self, policy_id: str, enabled: bool) -> Policy: ...
    def remove_policy(self, policy_id: str) -> None: ...
    def close(self) -> None: ...

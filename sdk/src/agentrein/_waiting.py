"""What the SDK waits for, the same way in both modes: a rollback to end, the rollback a decision started or
resumed, AgentRein to answer again. The SDK only waits: whoever runs the rollbacks and expires approvals
(the server's workers, or embedded mode's supervisor thread) is told nothing here."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol, TypeVar

from agentrein_core.errors import AgentReinUnavailableError
from agentrein_core.model import Approval, Rollback
from agentrein_core.read_models import ApprovalInfo
from agentrein_core.retry import retrying_until
from agentrein_core.rules import ROLLBACK_ENDED
from agentrein_core.statuses import ApprovalStatus, RollbackStatus

T = TypeVar("T")

#: How long an approval past its time is waited for: whoever runs the expiries (a server's maintenance runs
#: every second; embedded mode's supervisor wakes at its end) does it within this.
EXPIRY_GRACE = 1.0
#: How long a decision waits for the rollback it started or resumed to end or to wait for another reviewer.
FOLLOW_DECISION = 300.0


class Looks(Protocol):
    """The reads waiting for a rollback takes (both modes have them)."""

    def active_rollback(self, session_id: str) -> Rollback | None: ...
    def session_approvals(self, session_id: str) -> list[Approval]: ...
    def get_approval(self, approval_id: str) -> ApprovalInfo: ...
    def wait_for_decision(self, approval_id: str, timeout: float) -> ApprovalInfo: ...


def until_rollback_ends(
    looks: Looks, session_id: str, while_running: Callable[[Rollback], Rollback], *, wait: float
) -> None:
    """Wait until the session's rollback has ended, or until ``wait`` seconds have passed; ``while_running``
    waits (a while) for a running job to move and returns it as it then stands. A rollback approval is waited
    for too, to its decision or, when its time ends by then, to its expiry."""
    deadline = time.monotonic() + wait
    while True:
        job = looks.active_rollback(session_id)
        if job is None:
            return
        job = while_running(job)
        if job.status in ROLLBACK_ENDED:
            continue  # another rollback may have been started meanwhile
        remaining = deadline - time.monotonic()
        if job.status is RollbackStatus.WAITING_APPROVAL:
            approval = _pending_approval(looks, session_id, job)
            if approval is not None:
                if approval.time_remaining <= max(0.0, remaining) + EXPIRY_GRACE:
                    # Its time ends by our deadline, or just after it (it was opened after we started
                    # counting): the rules expire it, so wait for that rather than leave it pending.
                    approval = looks.wait_for_decision(approval.approval_id, approval.time_remaining + EXPIRY_GRACE)
                elif remaining > 0:
                    approval = looks.wait_for_decision(approval.approval_id, remaining)
                if approval.status is not ApprovalStatus.PENDING:
                    continue
        if remaining <= 0:
            return


def after_decision(looks: Looks, session_id: str, while_running: Callable[[Rollback], Rollback]) -> None:
    """Wait (at most ``FOLLOW_DECISION`` seconds) until the rollback a decision started or resumed has moved
    as far as it can: ended, or waiting for another reviewer."""
    deadline = time.monotonic() + FOLLOW_DECISION
    while time.monotonic() < deadline:
        job = looks.active_rollback(session_id)
        if job is None or job.status is RollbackStatus.WAITING_APPROVAL:
            return
        while_running(job)


def _pending_approval(looks: Looks, session_id: str, job: Rollback) -> ApprovalInfo | None:
    """The rollback approval ``job`` waits for, if it is still pending."""
    for approval in looks.session_approvals(session_id):
        if approval.rollback_id == job.rollback_id and approval.status is ApprovalStatus.PENDING:
            return looks.get_approval(approval.approval_id)
    return None


def outlasting(deadline: float, look: Callable[[], T]) -> T:
    """``look()`` once AgentRein answers it: a wait outlives an outage (a server restarted, a database locked
    a while) by trying again with backoff until ``deadline`` (a :func:`time.monotonic` instant), and only
    then raises :class:`AgentReinUnavailableError`. ``look`` must be a read, or safe to repeat."""
    return retrying_until(_is_outage, deadline)(look)


def _is_outage(exc: BaseException) -> bool:
    return isinstance(exc, AgentReinUnavailableError)

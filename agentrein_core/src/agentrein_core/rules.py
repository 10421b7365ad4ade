"""The status rules, all in one place (DESIGN.md §4, the status reference §1-§4).

Everything here is a pure function of records: no storage, no clock. The engine asks these functions what
may happen and the store applies the answer guarded by the status it read (compare-and-set).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from enum import StrEnum
from typing import TypeVar

from attrs import frozen

from agentrein_core.errors import InvalidTransitionError, RollbackRefusedError
from agentrein_core.model import Action, Approval, Session
from agentrein_core.statuses import (
    ActionStatus,
    ApprovalPurpose,
    ApprovalStatus,
    DisplayStatus,
    RollbackStatus,
    SessionStatus,
    UndoStatus,
)

A, U, S, P = ActionStatus, UndoStatus, SessionStatus, ApprovalStatus

#: Allowed action status changes. ``ROLLBACK_FAILED -> ROLLED_BACK`` is a retried undo that now succeeded.
ACTION_TRANSITIONS: Mapping[ActionStatus, frozenset[ActionStatus]] = {
    A.PENDING_APPROVAL: frozenset({A.CLEARED, A.FAILED, A.ROLLED_BACK}),
    A.CLEARED: frozenset({A.SUCCESS, A.FAILED}),
    A.SUCCESS: frozenset({A.ROLLED_BACK, A.ROLLBACK_FAILED}),
    A.FAILED: frozenset(),
    A.ROLLED_BACK: frozenset(),
    A.ROLLBACK_FAILED: frozenset({A.ROLLED_BACK, A.ROLLBACK_FAILED}),
}

#: Allowed undo status changes. A declined or failed undo may be attempted again by a later rollback.
UNDO_TRANSITIONS: Mapping[UndoStatus, frozenset[UndoStatus]] = {
    U.NONE: frozenset({U.SKIPPED, U.IN_PROGRESS, U.AWAITING_APPROVAL}),
    U.AWAITING_APPROVAL: frozenset({U.IN_PROGRESS, U.DECLINED}),
    U.IN_PROGRESS: frozenset({U.DONE, U.FAILED}),
    U.FAILED: frozenset({U.IN_PROGRESS, U.AWAITING_APPROVAL}),
    U.DECLINED: frozenset({U.IN_PROGRESS, U.AWAITING_APPROVAL}),
    U.SKIPPED: frozenset(),
    U.DONE: frozenset(),
}

SESSION_TRANSITIONS: Mapping[SessionStatus, frozenset[SessionStatus]] = {
    S.ACTIVE: frozenset({S.COMPLETED, S.FAILED, S.ROLLED_BACK, S.ABANDONED}),
    S.COMPLETED: frozenset({S.FAILED, S.ROLLED_BACK}),
    S.FAILED: frozenset({S.FAILED, S.ROLLED_BACK}),
    S.ABANDONED: frozenset({S.FAILED, S.ROLLED_BACK}),
    S.ROLLED_BACK: frozenset(),
}

APPROVAL_TRANSITIONS: Mapping[ApprovalStatus, frozenset[ApprovalStatus]] = {
    P.PENDING: frozenset({P.APPROVED, P.REJECTED, P.EXPIRED}),
    P.APPROVED: frozenset(),
    P.REJECTED: frozenset(),
    P.EXPIRED: frozenset(),
}

#: Who may roll back a session in which stored status (status reference §3).
ROLLBACK_ALLOWED_FROM: Mapping[str, frozenset[SessionStatus]] = {
    "agent": frozenset({S.ACTIVE}),
    "operator": frozenset({S.ACTIVE, S.FAILED, S.COMPLETED, S.ABANDONED}),
}

#: Actions a rollback chain walks: executed ones, and ones whose earlier undo failed (retried in place, so
#: a retry never skips a step of the LIFO order).
UNDOABLE = frozenset({A.SUCCESS, A.ROLLBACK_FAILED})
#: Actions past their confirmation: a confirmation sent again for one changes nothing and loses nothing (a held
#: call rolled back before it ran is ROLLED_BACK too, but no agent confirms a call that never ran).
PAST_CONFIRMATION = UNDOABLE | {A.ROLLED_BACK}
#: Actions whose outcome may still come in (and want an intent check then): a session's checks are found up to
#: the first of them (its watermark).
OUTCOME_AWAITED = frozenset({A.PENDING_APPROVAL, A.CLEARED})

#: Approvals someone waits for: the agent, for its call to run (before execution); a rollback, for an undo.
BLOCKING_PURPOSES = frozenset({ApprovalPurpose.BEFORE_EXECUTION, ApprovalPurpose.ROLLBACK})

#: A rollback job under way: running, or paused on a rollback approval.
ROLLBACK_UNDER_WAY = frozenset({RollbackStatus.RUNNING, RollbackStatus.WAITING_APPROVAL})
#: ...and those of one that has ended.
ROLLBACK_ENDED = frozenset({RollbackStatus.SUCCEEDED, RollbackStatus.FAILED})

#: How long an undo the server hands to the agent's process (DESIGN §4a) waits for a process to take it, and
#: how long the process that took it has to report its outcome; past either, the undo fails with that reason.
AGENT_UNDO_WAIT = timedelta(seconds=60)
AGENT_UNDO_LEASE = timedelta(seconds=120)

#: An approved action still ``CLEARED`` this long after approval is flagged ``unconfirmed``.
UNCONFIRMED_AFTER = timedelta(hours=1)
#: A session's rollback undoes nothing recorded before a call that was cleared to run until that call's outcome
#: is in (the chain stays last-first), for at most this long after the call was cleared; a call still
#: unconfirmed by then is left behind (its process died with it, most likely) and the chain goes on.
CONFIRMATION_AWAITED = timedelta(seconds=30)
#: An agent counts as waiting for its before-execution request while a long-poll of its on the request is open,
#: and this long after one ended (its next one starts at once, or after a reconnection's first backoff).
WAITER_GRACE = timedelta(seconds=5)
#: An ``ACTIVE`` session without activity this long becomes ``ABANDONED``.
ABANDONED_AFTER = timedelta(hours=24)
#: A recorded call refreshes its session's last activity only once it is this old: most calls then leave the
#: column, and the (status, last activity) index behind it, unwritten (a page less per call); against the
#: 24 hours of :data:`ABANDONED_AFTER` the minute is nothing.
ACTIVITY_GRAIN = timedelta(minutes=1)

E = TypeVar("E", bound=StrEnum)


def check(kind: str, table: Mapping[E, frozenset[E]], current: E, new: E) -> None:
    """Raise :class:`InvalidTransitionError` unless ``current -> new`` is in ``table``."""
    if new not in table[current]:
        raise InvalidTransitionError(f"{kind} cannot go from {current} to {new}")


@frozen
class Clue:
    """What a display-status rule looks for among a session's records: whether ``present`` (or, if not,
    none) of its actions have a ``field`` (``status``, ``undo_status``) in ``values``; of its approvals
    (``field`` ``approval``) a status in ``values``; or whether its stored status (``field`` ``stored``) is
    among ``values``. The store turns the same clues into SQL, so that a listing filters by display status
    in the database, by these rules and no others."""

    field: str
    values: frozenset[StrEnum]
    present: bool = True

    def holds(self, session: Session, actions: list[Action], approvals: list[Approval]) -> bool:
        if self.field == "stored":
            return session.status in self.values
        if self.field == "approval":
            found = any(p.status in self.values for p in approvals)
        else:
            found = any(getattr(a, self.field) in self.values for a in actions)
        return found is self.present


def _clue(field: str, *values: StrEnum, present: bool = True) -> Clue:
    return Clue(field, frozenset(values), present)


#: An action's undo that a rollback has begun and not ended: its session shows ``ROLLING_BACK``.
UNDO_UNDER_WAY = frozenset({U.IN_PROGRESS, U.AWAITING_APPROVAL})

#: How a session's display status is derived (DESIGN.md §4): the first rule whose clues all hold wins.
DISPLAY_RULES: tuple[tuple[DisplayStatus, tuple[Clue, ...]], ...] = (
    (DisplayStatus.ROLLING_BACK, (_clue("undo_status", *UNDO_UNDER_WAY),)),
    (DisplayStatus.ROLLBACK_FAILED, (_clue("status", A.ROLLBACK_FAILED),)),
    (DisplayStatus.AWAITING_APPROVAL, (_clue("approval", P.PENDING),)),
    (DisplayStatus.REVERTED, (_clue("status", A.ROLLED_BACK), _clue("status", A.SUCCESS, present=False))),
    (DisplayStatus.PARTIALLY_REVERTED, (_clue("status", A.ROLLED_BACK), _clue("status", A.SUCCESS))),
    # Not reached by the engine's own transitions; never fail a read.
    (DisplayStatus.REVERTED, (_clue("stored", S.ROLLED_BACK),)),
    *((DisplayStatus(s.value), (_clue("stored", s),)) for s in (S.ACTIVE, S.COMPLETED, S.ABANDONED, S.FAILED)),
)


def display_status(session: Session, actions: Iterable[Action], approvals: Iterable[Approval]) -> DisplayStatus:
    """Derive what a session looks like; the first rule of :data:`DISPLAY_RULES` that matches wins."""
    actions, approvals = list(actions), list(approvals)
    for shown, clues in DISPLAY_RULES:
        if all(clue.holds(session, actions, approvals) for clue in clues):
            return shown
    raise AssertionError(f"no display rule matches a session stored {session.status}")  # the last rules cover all


def acts_on(session: Session, agent_key: str | None) -> bool:
    """Whether a caller may act on ``session`` (record in it, settle its calls, read it): an agent key (its id,
    ``agent_key``) on the sessions it opened only, whichever process holds it; operators and embedded callers
    (``agent_key`` None) on all their organisation's. A session no key opened (an embedded engine's, or one
    opened before sessions remembered their key) is nobody's agent's: operators act on it."""
    return agent_key is None or session.opened_by_key == agent_key


def check_rollback_allowed(
    session: Session, actions: Iterable[Action], display: DisplayStatus, caller_role: str
) -> None:
    """Raise :class:`RollbackRefusedError` unless ``caller_role`` may roll ``session`` back now (§3)."""
    allowed = ROLLBACK_ALLOWED_FROM.get(caller_role)
    if allowed is None:
        raise RollbackRefusedError(f"role {caller_role!r} may not roll sessions back")
    if session.status not in allowed:
        listed = ", ".join(sorted(allowed))
        raise RollbackRefusedError(
            f"an {caller_role} may roll back only sessions that are {listed}; this one is {session.status}"
        )
    if display is DisplayStatus.REVERTED:
        raise RollbackRefusedError("the session is already REVERTED")
    if not any(a.status is A.SUCCESS for a in actions):
        raise RollbackRefusedError("the session has no SUCCESS action to roll back")


def session_status_after_rollback(session: Session, actions: Iterable[Action]) -> SessionStatus:
    """A finished chain leaves the session ``ROLLED_BACK``, unless actions are still waiting to run or be
    confirmed (``PENDING_APPROVAL``/``CLEARED``): those are never undone, so the stored status stays."""
    actions = list(actions)
    if any(a.status in (A.PENDING_APPROVAL, A.CLEARED) for a in actions):
        return session.status
    if not any(a.status is A.ROLLED_BACK for a in actions):
        return session.status  # every undo was skipped: nothing was reverted
    return S.ROLLED_BACK


def is_unconfirmed(action: Action, approval: Approval, now: datetime) -> bool:
    """An approved action the SDK never confirmed: still ``CLEARED`` an hour after its approval."""
    return (
        action.status is A.CLEARED
        and approval.status is P.APPROVED
        and approval.resolved_at is not None
        and now - approval.resolved_at >= UNCONFIRMED_AFTER
    )


def stopped_waiting(approval: Approval, at: datetime) -> datetime | None:
    """When the agent had stopped waiting for its before-execution request, as of ``at``: its last long-poll
    on it ended (none ever opened: the request was made) more than :data:`WAITER_GRACE` before. ``None`` while
    it waits, and for the other purposes (no agent waits for them)."""
    if approval.purpose is not ApprovalPurpose.BEFORE_EXECUTION:
        return None
    seen = approval.waited_until or approval.requested_at
    return seen if at - seen > WAITER_GRACE else None


def is_abandoned(session: Session, now: datetime) -> bool:
    return session.status is S.ACTIVE and now - session.last_activity_at >= ABANDONED_AFTER

"""Inside a transaction: reads that must find their record, the guarded writes every status change goes
through (checked against the transition tables of :mod:`agentrein_core.rules`, then compare-and-set), and the
read models as a transaction reads them."""

from __future__ import annotations

from datetime import datetime

from attrs import evolve

import agentrein_core.engine.cursors as cursors
from agentrein_core import rules
from agentrein_core.converter import undo_to_wire
from agentrein_core.errors import InvalidTransitionError, NotFoundError
from agentrein_core.model import JSON, Action, Approval, Session, UndoConfig
from agentrein_core.read_models import (
    ApprovalInfo,
    SessionInfo,
    approval_info,
    session_info,
    session_read,
    session_summary,
)
from agentrein_core.statuses import ActionStatus, SessionStatus, UndoStatus
from agentrein_core.store import Tx


# ``agent_key``: the caller is that agent key, which acts only on the sessions it opened (rules.acts_on).
# Another agent's records are not found, as another organisation's are: no answer says they exist.
def session_of(tx: Tx, org_id: str, session_id: str, lock: bool = False, *, agent_key: str | None = None) -> Session:
    session = tx.sessions.get(org_id, session_id, lock=lock)
    if session is None or not rules.acts_on(session, agent_key):
        raise NotFoundError("session", session_id)
    return session


def acts_on(tx: Tx, org_id: str, session_id: str, agent_key: str | None) -> bool:
    """Whether the caller acts on the session (read only for an agent key: others act on all sessions)."""
    if agent_key is None:
        return True
    session = tx.sessions.get(org_id, session_id)
    return session is not None and rules.acts_on(session, agent_key)


def check_acts_on(tx: Tx, org_id: str, session_id: str, agent_key: str | None) -> None:
    if not acts_on(tx, org_id, session_id, agent_key):
        raise NotFoundError("session", session_id)


def action_of(tx: Tx, org_id: str, action_id: str, *, agent_key: str | None = None) -> Action:
    action = tx.actions.get(org_id, action_id)
    if action is None or not acts_on(tx, org_id, action.session_id, agent_key):
        raise NotFoundError("action", action_id)
    return action


def approval_of(tx: Tx, org_id: str, approval_id: str, *, agent_key: str | None = None) -> Approval:
    approval = tx.approvals.get(org_id, approval_id)
    if approval is None or not acts_on(tx, org_id, approval.session_id, agent_key):
        raise NotFoundError("approval", approval_id)
    return approval


def replace(tx: Tx, record: object, **expected: object) -> None:
    """Write ``record`` if its row still holds the ``expected`` values; else the caller lost a race."""
    if not tx.replace(record, **expected):
        raise InvalidTransitionError(f"{type(record).__name__} changed concurrently; try again")


def set_action(
    tx: Tx,
    action: Action,
    now: datetime,
    status: ActionStatus | None = None,
    undo_status: UndoStatus | None = None,
    **other: object,
) -> Action:
    """Change an action's status and/or undo status, checked against the transition tables."""
    changes = dict(other)
    if status is not None and status is not action.status:
        rules.check("action", rules.ACTION_TRANSITIONS, action.status, status)
        changes["status"] = status
    if undo_status is not None and undo_status is not action.undo_status:
        rules.check("undo", rules.UNDO_TRANSITIONS, action.undo_status, undo_status)
        changes["undo_status"] = undo_status
    changed = evolve(action, updated_at=now, **changes)  # type: ignore[arg-type]
    replace(tx, changed, status=action.status, undo_status=action.undo_status)
    return changed


def set_session_status(tx: Tx, session: Session, status: SessionStatus, **changes: object) -> None:
    if status is session.status:
        return
    rules.check("session", rules.SESSION_TRANSITIONS, session.status, status)
    replace(tx, evolve(session, status=status, **changes), status=session.status)  # type: ignore[arg-type]


def undo_row(undo: UndoConfig | None) -> JSON | None:
    return undo_to_wire(undo) if undo is not None else None


def read_session(tx: Tx, session: Session, *, verified: bool = False) -> SessionInfo:
    """The session as read; ``verified`` adds its intent verifications (one more query, so lists skip it)."""
    checks = tx.verifications.of_session(session.session_id) if verified else None
    return session_info(
        session, tx.actions.of_session(session.session_id), tx.approvals.of_session(session.session_id), checks
    )


def actions_after(action: Action) -> str:
    """The cursor of the page of actions that starts after ``action`` (keyset on ``seq``)."""
    return cursors.encode((action.seq,))


def read_first_actions(tx: Tx, session: Session, limit: int) -> SessionInfo:
    """The session as read with its first ``limit`` actions, and where the rest start
    (:attr:`SessionInfo.actions_cursor`): its display status and action count are worked out in SQL, so the
    read costs the same however many actions it holds."""
    listed = tx.sessions.summary(session.org_id, session.session_id)
    if listed is None:
        raise NotFoundError("session", session.session_id)
    actions = tx.actions.page(session.session_id, limit)
    checks = tx.verifications.of_actions(session.session_id, [a.action_id for a in actions])
    more = actions_after(actions[-1]) if listed.action_count > len(actions) else None
    summary = session_summary(session, listed.display_status, listed.action_count)
    return session_read(summary, actions, tx.approvals.of_session(session.session_id), checks, more)


def read_approval(tx: Tx, approval: Approval, now: datetime) -> ApprovalInfo:
    action = action_of(tx, approval.org_id, approval.action_id)
    session = session_of(tx, approval.org_id, approval.session_id)
    return approval_info(approval, action, session, now)

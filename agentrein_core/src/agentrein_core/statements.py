"""The store's prebuilt statements: built once at import and prepared on the driver (:mod:`prepared`), so that
the hot path (every recorded call) pays for executing them, not for constructing or compiling them.

Each takes named parameters: ``key`` (a record's id), ``org`` (its organisation), ``sid`` (a session),
``aid`` (an action), ``now``, and those named where the statement is.
"""

from __future__ import annotations

import functools
from typing import Any

import sqlalchemy as sa

from agentrein_core import rules, schema
from agentrein_core.model import (
    FAILURE_KEY_SUFFIX,
    Action,
    ApiKey,
    Approval,
    Delivery,
    Event,
    Organisation,
    Policy,
    Rollback,
    Session,
    User,
    Verification,
    Webhook,
)
from agentrein_core.prepared import Prepared
from agentrein_core.statuses import ActionStatus, SessionStatus, UndoStatus

#: Each record's table and primary key.
TABLES: dict[type[Any], tuple[sa.Table, str]] = {
    Organisation: (schema.organisations, "org_id"),
    Session: (schema.sessions, "session_id"),
    Action: (schema.actions, "action_id"),
    Approval: (schema.approvals, "approval_id"),
    Policy: (schema.policies, "policy_id"),
    Rollback: (schema.rollbacks, "rollback_id"),
    ApiKey: (schema.api_keys, "key_id"),
    User: (schema.users, "user_id"),
    Verification: (schema.verifications, "verification_id"),
    Event: (schema.events, "event_id"),
    Webhook: (schema.webhooks, "webhook_id"),
    Delivery: (schema.deliveries, "delivery_id"),
}


def _select_by_id(table: sa.Table, key: str, scoped: bool) -> sa.Select[Any]:
    """``SELECT * FROM table WHERE key = :key [AND org_id = :org]``."""
    stmt = sa.select(table).where(table.c[key] == sa.bindparam("key"))
    return stmt.where(table.c.org_id == sa.bindparam("org")) if scoped else stmt


_UNSCOPED = (Organisation, ApiKey, Event)  # looked up by id alone
INSERT = {cls: Prepared(table.insert()) for cls, (table, _) in TABLES.items()}
_SELECTS = {cls: _select_by_id(table, key, scoped=cls not in _UNSCOPED) for cls, (table, key) in TABLES.items()}
BY_ID = {cls: Prepared(stmt) for cls, stmt in _SELECTS.items()}
#: The same, holding the row until the transaction ends (PostgreSQL; SQLite's writer holds the whole file).
BY_ID_LOCKED = {cls: Prepared(stmt.with_for_update()) for cls, stmt in _SELECTS.items()}

_S, _A, _P, _O, _R = schema.sessions, schema.actions, schema.approvals, schema.organisations, schema.rollbacks
# Keyed by the bound organisation, not correlated to sessions.org_id: SQLite renders RETURNING's column names
# unqualified, so a correlated ``org_id = org_id`` would match every organisation.
_ORG_OF_SESSION = sa.select(_O.c.policy_version, _O.c.plan).where(_O.c.org_id == sa.bindparam("org"))
_TAKE_SEQ = (
    _S.update()
    .where(_S.c.session_id == sa.bindparam("sid"), _S.c.org_id == sa.bindparam("org"))
    .values(last_seq=_S.c.last_seq + 1, last_activity_at=sa.bindparam("now"))
    .returning(
        _S.c.last_seq,
        _S.c.agent_id,
        _ORG_OF_SESSION.with_only_columns(_O.c.policy_version).scalar_subquery().label("policy_version"),
        _ORG_OF_SESSION.with_only_columns(_O.c.plan).scalar_subquery().label("plan"),
    )
)
# Spelled as ORs: a prepared statement has a fixed parameter list (an IN list would expand per execution).
_NO_ROLLBACK_UNDER_WAY = ~sa.exists().where(
    _R.c.session_id == _S.c.session_id, sa.or_(*(_R.c.status == status for status in sorted(rules.ROLLBACK_UNDER_WAY)))
)
#: Take the session's next seq, mark it active ``now``, and read what a write-ahead record needs.
TAKE_SEQ = Prepared(_TAKE_SEQ)
#: The same, only for an ACTIVE session that is not being rolled back (the only kind that accepts a new action).
TAKE_SEQ_ACTIVE = Prepared(_TAKE_SEQ.where(_S.c.status == SessionStatus.ACTIVE, _NO_ROLLBACK_UNDER_WAY))
TOUCH = Prepared(_S.update().where(_S.c.session_id == sa.bindparam("sid")).values(last_activity_at=sa.bindparam("now")))
#: An action's outcome, ``expected -> new_status``, guarded by its current status (and its session, if ``sid``).
CONFIRM = Prepared(
    _A.update()
    .where(
        _A.c.action_id == sa.bindparam("key"),
        _A.c.org_id == sa.bindparam("org"),
        _A.c.status == sa.bindparam("expected"),
        sa.or_(sa.bindparam("sid", type_=sa.String).is_(None), _A.c.session_id == sa.bindparam("sid")),
    )
    .values(
        status=sa.bindparam("new_status"),
        response=sa.bindparam("response"),
        undo=sa.bindparam("undo"),
        updated_at=sa.bindparam("now"),
    )
    .returning(*_A.c)
)
BUMP_POLICY_VERSION = Prepared(
    _O.update().where(_O.c.org_id == sa.bindparam("org")).values(policy_version=_O.c.policy_version + 1)
)
ENABLED_POLICIES = Prepared(
    sa.select(schema.policies)
    .where(schema.policies.c.org_id == sa.bindparam("org"), schema.policies.c.enabled.is_(True))
    .order_by(schema.policies.c.created_at)
)
ACTIONS_OF = Prepared(sa.select(_A).where(_A.c.session_id == sa.bindparam("sid")).order_by(_A.c.seq))
APPROVALS_OF_SESSION = Prepared(sa.select(_P).where(_P.c.session_id == sa.bindparam("sid")).order_by(_P.c.requested_at))
LATEST_ROLLBACK = Prepared(
    sa.select(_R).where(_R.c.session_id == sa.bindparam("sid")).order_by(_R.c.created_at.desc()).limit(1)
)
APPROVALS_OF_ACTION = Prepared(sa.select(_P).where(_P.c.action_id == sa.bindparam("aid")).order_by(_P.c.requested_at))


@functools.cache
def guarded_update(
    table: sa.Table, columns: tuple[str, ...], expected: tuple[tuple[str, bool], ...], returning: bool
) -> Prepared:
    """``UPDATE table SET <each of columns> = :<column> WHERE <its key> = :key AND <expected>``, where each
    ``(column, is_null)`` of ``expected`` is ``column IS NULL`` or ``column = :was_<column>``; it answers the
    whole row when ``returning``, else the key alone (a row answered is a row matched). Built once for each
    shape of a compare-and-set the store makes (:meth:`agentrein_core.store.Tx.replace`)."""
    unknown = sorted(set(columns) - set(table.c.keys()))
    if unknown:  # SQLAlchemy's .values() refused them; compiled with column keys, they would be dropped silently
        raise ValueError(f"{table.name} has no column {', '.join(unknown)}")
    key = table.primary_key.columns.values()[0]
    stmt = table.update().where(key == sa.bindparam("key", type_=key.type))
    for column, is_null in expected:
        c = table.c[column]
        stmt = stmt.where(c.is_(None) if is_null else c == sa.bindparam(f"was_{column}", type_=c.type))
    return Prepared(stmt.returning(*(table.c if returning else [key])), columns=columns)


def guard_params(
    key: str, values: dict[str, Any], expected: dict[str, Any]
) -> tuple[tuple[tuple[str, bool], ...], dict[str, Any]]:
    """The shape of ``expected`` for :func:`guarded_update`, and the parameters of one run of it."""
    shape = tuple((column, value is None) for column, value in expected.items())
    params = {**values, "key": key}
    for column, value in expected.items():
        if value is not None:
            params[f"was_{column}"] = value
    return shape, params


_UNDOABLE = sa.or_(*(_A.c.status == status for status in sorted(rules.UNDOABLE)))
_NEXT_TO_UNDO = (
    sa.select(_A)
    .where(_A.c.session_id == sa.bindparam("sid"), _UNDOABLE, _A.c.undo_status != UndoStatus.SKIPPED)
    .order_by(_A.c.seq.desc())
    .limit(1)
)
#: The head of a rollback's chain: the executed action of the highest seq neither undone nor skipped.
NEXT_TO_UNDO = Prepared(_NEXT_TO_UNDO)
#: The same, among the actions whose undo was asked for one by one.
NEXT_REQUESTED_TO_UNDO = Prepared(_NEXT_TO_UNDO.where(_A.c.undo_requested.is_(True)))
_FAILURE = _A.alias("failure")
#: A session's calls cleared to run since ``since`` whose outcome is not in yet: ``CLEARED``, with no failure
#: recorded for them (an approved action's failure is a record of its own, under a suffixed key).
AWAITED_CONFIRMATIONS = Prepared(
    sa.select(_A).where(
        _A.c.session_id == sa.bindparam("sid"),
        _A.c.status == ActionStatus.CLEARED,
        _A.c.updated_at > sa.bindparam("since", type_=_A.c.updated_at.type),
        ~sa.exists().where(
            _FAILURE.c.session_id == sa.bindparam("sid"),
            _FAILURE.c.idempotency_key == _A.c.idempotency_key + FAILURE_KEY_SUFFIX,
        ),
    )
)

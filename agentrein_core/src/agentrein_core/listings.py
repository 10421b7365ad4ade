"""The store's reads for lists (:class:`Listings`, part of :class:`~agentrein_core.store.Tx`): pages of
sessions filtered in the database (their display status too, by the rules of :data:`rules.DISPLAY_RULES`),
the records of a whole page read in a fixed number of queries, and the approval lists joined to their
actions and sessions. Each costs the same however many sessions and actions the database holds: every
filter and order is served by an index (see ``schema.py``)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from agentrein_core import rules, schema, statements
from agentrein_core.converter import from_columns
from agentrein_core.model import Action, Approval, Rollback, Session
from agentrein_core.prepared import Prepared
from agentrein_core.statuses import ApprovalStatus, DisplayStatus, SessionStatus
from agentrein_core.views import SessionSummary, session_summary

T = TypeVar("T")
_S, _A, _P, _R = schema.sessions, schema.actions, schema.approvals, schema.rollbacks
Joined = list[tuple[Approval, Action, Session]]


def _holds(clue: rules.Clue, sessions: sa.FromClause = _S) -> sa.ColumnElement[bool]:
    """``clue`` of a session as SQL over the listed session's row (of ``sessions``). Its values are written into
    the SQL, not bound, so that an index of the actions that give the clue (a partial index, ``schema.py``) can
    be used where the planner cannot see bound values: SQLite's plans, and the generic plan PostgreSQL keeps for
    a prepared statement."""
    values = [sa.literal(value.value, literal_execute=True) for value in sorted(clue.values)]
    if clue.field == "stored":
        return sessions.c.status.in_(values)
    if clue.field == "approval":
        found = sa.select(1).where(_P.c.session_id == sessions.c.session_id, _P.c.status.in_(values))
    else:
        found = sa.select(1).where(_A.c.session_id == sessions.c.session_id, _A.c[clue.field].in_(values))
    # OFFSET 0 keeps PostgreSQL from turning the test into a hash of every session that passes it (all the
    # actions of a status), built before the first row of the page: each listed session is tested alone.
    exists = found.offset(0).exists()
    return exists if clue.present else ~exists


def _summarised(page: sa.Subquery) -> sa.Select[Any]:
    """The sessions of ``page`` with their display status (the first of :data:`rules.DISPLAY_RULES` that matches)
    and action count, worked out for the page's rows alone: over the whole table, PostgreSQL would work them out
    for every session before sorting and keeping a page."""
    whens = [(sa.and_(*(_holds(clue, page) for clue in clues)), shown.value) for shown, clues in rules.DISPLAY_RULES]
    count = sa.select(sa.func.count()).where(_A.c.session_id == page.c.session_id).scalar_subquery()
    newest_first = (page.c.created_at.desc(), page.c.session_id.desc())
    return sa.select(page, sa.case(*whens).label("display_status"), count.label("action_count")).order_by(*newest_first)


def shown_as(display: DisplayStatus) -> sa.ColumnElement[bool]:
    """Whether the listed session displays ``display``: a rule for it matches, and no earlier rule does."""
    earlier: list[sa.ColumnElement[bool]] = []
    ways: list[sa.ColumnElement[bool]] = []
    for shown, clues in rules.DISPLAY_RULES:
        matched = sa.and_(*(_holds(clue) for clue in clues))
        if shown is display:
            ways.append(sa.and_(matched, *(sa.not_(e) for e in earlier)))
        earlier.append(matched)
    return sa.or_(*ways)


class Listings:
    """Reads of many records at once; mixed into :class:`~agentrein_core.store.Tx`."""

    conn: Connection

    if TYPE_CHECKING:

        def _all(self, cls: type[T], stmt: Any, params: dict[str, Any] | None = None) -> list[T]: ...

        def _prepared(self, cls: type[T], stmt: Prepared, params: dict[str, Any]) -> list[T]: ...

    def list_sessions(
        self,
        org_id: str,
        limit: int = 100,
        *,
        status: SessionStatus | None = None,
        display_status: DisplayStatus | None = None,
        agent_id: str | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        after: tuple[datetime, str] | None = None,
        opened_by: str | None = None,
    ) -> list[SessionSummary]:
        """The organisation's sessions, newest first, filtered, each with its display status and action count
        read in the same query; ``after`` is the keyset position (``created_at``, ``session_id``) of the last
        session of the previous page; ``opened_by``: only those this API key opened."""
        t = _S
        stmt = sa.select(t).where(t.c.org_id == org_id)
        if status is not None:
            stmt = stmt.where(t.c.status == status)
        if display_status is not None:
            stmt = stmt.where(shown_as(display_status))
        if agent_id is not None:
            stmt = stmt.where(t.c.agent_id == agent_id)
        if opened_by is not None:
            stmt = stmt.where(t.c.opened_by_key == opened_by)
        if created_after is not None:
            stmt = stmt.where(t.c.created_at >= created_after)
        if created_before is not None:
            stmt = stmt.where(t.c.created_at < created_before)
        if after is not None:
            stmt = stmt.where(sa.tuple_(t.c.created_at, t.c.session_id) < sa.tuple_(*after))
        page = stmt.order_by(t.c.created_at.desc(), t.c.session_id.desc()).limit(limit).subquery("page")
        rows = self.conn.execute(_summarised(page))
        summaries = []
        for row in rows:
            columns = dict(row._mapping)
            shown, count = DisplayStatus(columns.pop("display_status")), columns.pop("action_count")
            summaries.append(session_summary(from_columns(columns, Session), shown, count))
        return summaries

    def actions_of_sessions(self, session_ids: Sequence[str]) -> dict[str, list[Action]]:
        """The actions of each session, in ``seq`` order, in one query."""
        return self._of_sessions(Action, _A, session_ids, _A.c.session_id, _A.c.seq)

    def rollbacks_of_sessions(self, session_ids: Sequence[str]) -> dict[str, list[Rollback]]:
        """The rollbacks of each session, oldest first, in one query."""
        return self._of_sessions(Rollback, _R, session_ids, _R.c.created_at, _R.c.rollback_id)

    def _of_sessions(
        self, cls: type[T], table: sa.Table, session_ids: Sequence[str], *order: sa.ColumnElement[Any]
    ) -> dict[str, list[T]]:
        found: list[T] = []
        for ids in _chunks(session_ids):
            found += self._all(cls, sa.select(table).where(table.c.session_id.in_(ids)).order_by(*order))
        return _by_session(found)

    def next_to_undo(self, session_id: str, only_requested: bool) -> list[Action]:
        """The head of a rollback's chain (:func:`agentrein_core.rollback.chain`), read alone, so that each
        step of a long rollback reads one action rather than the whole session: the executed action (or
        one whose undo failed) of the highest seq that is neither undone nor skipped."""
        stmt = statements.NEXT_REQUESTED_TO_UNDO if only_requested else statements.NEXT_TO_UNDO
        return self._prepared(Action, stmt, {"sid": session_id})

    def awaited_confirmations(self, session_id: str, cleared_since: datetime) -> list[Action]:
        """The session's calls cleared to run since ``cleared_since`` whose outcome is not in yet
        (:func:`agentrein_core.rollback.next_step` waits for them): ``CLEARED``, and no failure recorded for
        them (an approved action's failure is a record of its own, the action staying ``CLEARED``)."""
        return self._prepared(Action, statements.AWAITED_CONFIRMATIONS, {"sid": session_id, "since": cleared_since})

    def list_approvals(
        self,
        org_id: str,
        status: ApprovalStatus | None,
        limit: int | None = None,
        after: tuple[int, datetime, str] | None = None,
        opened_by: str | None = None,
    ) -> Joined:
        """The organisation's approvals, pending first and oldest first (the order a reviewer works in), each
        with its action and session, in one query; at most ``limit``, from after the keyset position ``after``
        (:func:`approval_position` of the last approval of the previous page); ``opened_by``: only those of
        sessions this API key opened."""
        chosen = sa.select(_P.c.approval_id).where(_P.c.org_id == org_id)
        if status is not None:
            chosen = chosen.where(_P.c.status == status)
        if opened_by is not None:
            own = sa.select(_S.c.session_id).where(_S.c.org_id == org_id, _S.c.opened_by_key == opened_by)
            chosen = chosen.where(_P.c.session_id.in_(own))
        key = (_PENDING_FIRST, _P.c.requested_at, _P.c.approval_id)
        if after is not None:
            chosen = chosen.where(sa.tuple_(*key) > sa.tuple_(*after))
        return self._approval_rows(_page_of(org_id, chosen.order_by(*key).limit(limit), key))

    def approval_queue(self, org_id: str, decided: int, shown: int) -> tuple[Joined, Joined, int]:
        """The ``shown`` pending approvals a reviewer decides first (in the order of
        :func:`agentrein_core.views.queue_order`: those someone waits for first, then least time left first),
        the ``decided`` latest decisions (newest first), each with its action and session, joined in one query
        apiece; and how many approvals are pending in all."""
        waited_for = sa.case((_P.c.purpose.in_(sorted(rules.BLOCKING_PURPOSES)), 0), else_=1)
        first = (waited_for, _P.c.timeout_at, _P.c.approval_id)
        chosen = sa.select(_P.c.approval_id).where(_P.c.org_id == org_id, _P.c.status == ApprovalStatus.PENDING)
        pending = _page_of(org_id, chosen.order_by(*first).limit(shown), first)
        newest = (_P.c.resolved_at.desc(), _P.c.approval_id.desc())
        chosen = sa.select(_P.c.approval_id).where(_P.c.org_id == org_id, _P.c.status != ApprovalStatus.PENDING)
        latest = _page_of(org_id, chosen.order_by(*newest).limit(decided), newest)
        waiting = sa.select(sa.func.count()).where(_P.c.org_id == org_id, _P.c.status == ApprovalStatus.PENDING)
        return self._approval_rows(pending), self._approval_rows(latest), int(self.conn.execute(waiting).scalar_one())

    def _approval_rows(self, stmt: Any) -> Joined:
        result = self.conn.execute(stmt)
        # Where each table's columns are in a row (labelled ``<table>_<column>``), found once per query, not
        # once per row and table.
        labels = list(result.keys())
        places = {
            table: [(i, label[len(table) + 1 :]) for i, label in enumerate(labels) if label.startswith(table + "_")]
            for table in ("approvals", "actions", "sessions")
        }

        def part(row: Any, table: str, cls: type[T]) -> T:
            return from_columns({column: row[i] for i, column in places[table]}, cls)

        return [
            (part(row, "approvals", Approval), part(row, "actions", Action), part(row, "sessions", Session))
            for row in result
        ]


_PENDING_FIRST = sa.case((_P.c.status == ApprovalStatus.PENDING, 0), else_=1)


def approval_position(approval: Approval) -> tuple[int, datetime, str]:
    """Where ``approval`` sorts in :meth:`Listings.list_approvals`."""
    return (0 if approval.status is ApprovalStatus.PENDING else 1, approval.requested_at, approval.approval_id)


def _page_of(org_id: str, chosen: sa.Select[Any], order: tuple[sa.ColumnElement[Any], ...]) -> sa.Select[Any]:
    """The approvals ``chosen`` selects (their ids, ordered and limited among the approvals alone, through an
    index), joined to their actions and sessions only then, in ``order``."""
    page = chosen.subquery()
    return _joined(org_id).join(page, page.c.approval_id == _P.c.approval_id).order_by(*order)


def _joined(org_id: str) -> sa.Select[Any]:
    return (
        sa.select(_P, _A, _S)
        .join(_A, _A.c.action_id == _P.c.action_id)
        .join(_S, _S.c.session_id == _P.c.session_id)
        .where(_P.c.org_id == org_id)
        .set_label_style(sa.LABEL_STYLE_TABLENAME_PLUS_COL)
    )


#: Session ids bound in one ``IN (…)``, well within SQLite's and PostgreSQL's limits on parameters.
_CHUNK = 5_000


def _chunks(ids: Sequence[str]) -> list[Sequence[str]]:
    return [ids[i : i + _CHUNK] for i in range(0, len(ids), _CHUNK)]


def _by_session(records: list[Any]) -> dict[str, list[Any]]:
    grouped: dict[str, list[Any]] = defaultdict(list)
    for record in records:
        grouped[record.session_id].append(record)
    return grouped

"""Approvals: one by id or of a session or action, those due to expire, the agent's wait on one, and the lists a
reviewer reads (pending first, or in the order a reviewer decides them), each joined to its action and
session in one query."""

from __future__ import annotations

import heapq
import itertools
from datetime import datetime
from typing import Any, TypeVar

import sqlalchemy as sa
from attrs import frozen

import agentrein_core.store.schema as schema
from agentrein_core import rules
from agentrein_core.converter import from_columns
from agentrein_core.model import Action, Approval, Session
from agentrein_core.statuses import ActionStatus, ApprovalPurpose, ApprovalStatus
from agentrein_core.store.rows import Rows

T = TypeVar("T")
_S, _A, _P = schema.sessions, schema.actions, schema.approvals
Joined = list[tuple[Approval, Action, Session]]
# Read at every step of a rollback, built once (building a statement cost as much as running it).
_OF_ACTION = sa.select(_P).where(_P.c.action_id == sa.bindparam("aid")).order_by(_P.c.requested_at)
_PENDING_OF_ACTION = (
    sa.select(_P)
    .where(_P.c.action_id == sa.bindparam("aid"), _P.c.status == ApprovalStatus.PENDING.value)
    .order_by(_P.c.requested_at, _P.c.approval_id)
)


@frozen
class Approvals:
    rows: Rows

    def get(self, org_id: str, approval_id: str) -> Approval | None:
        return self.rows.one(Approval, approval_id, org_id)

    def of_session(self, session_id: str) -> list[Approval]:
        return self.rows.all(Approval, sa.select(_P).where(_P.c.session_id == session_id).order_by(_P.c.requested_at))

    def of_action(self, action_id: str) -> list[Approval]:
        return self.rows.all(Approval, _OF_ACTION, {"aid": action_id})

    def hold_pending_of(self, action_id: str) -> list[Approval]:
        """The action's pending approvals, oldest first, their rows held until this transaction ends
        (PostgreSQL), before the action's own: the order a decision takes them in (its approval, then its
        action). A use case that writes the action and then closes its approvals, taking them the other way
        round, deadlocked with one."""
        return self.rows.held(Approval, _PENDING_OF_ACTION, {"aid": action_id})

    def hold_pending_in(self, session_id: str) -> None:
        """Hold the rows of the session's pending approvals, in the order :meth:`hold_pending_of` holds an action's
        (PostgreSQL): a sandbox rollback closes the reviews of every action it flips."""
        pending = sa.select(_P.c.approval_id).where(
            _P.c.session_id == session_id, _P.c.status == ApprovalStatus.PENDING
        )
        self.rows.hold(pending.order_by(_P.c.requested_at, _P.c.approval_id))

    def sessions_held_for_decision(self, org_id: str, session_ids: list[str]) -> set[str]:
        """Of the organisation's ``session_ids``, those with a pending approval that holds something up (a call
        or a rollback): the others' pending approvals, if any, are all reviews of calls that already ran."""
        stmt = sa.select(_P.c.session_id).where(
            _P.c.org_id == org_id,
            _P.c.session_id.in_(session_ids),
            _P.c.status == ApprovalStatus.PENDING,
            _P.c.purpose != ApprovalPurpose.AFTER_EXECUTION,
        )
        return set(self.rows.conn.execute(stmt.distinct()).scalars())

    def note_waiter(self, approval_id: str, until: datetime, *, noted: datetime | None = None) -> None:
        """The agent waits for the approval until ``until`` (:attr:`Approval.waited_until`); that column alone
        is written, so nothing a decision wrote meanwhile is written over. ``noted``: only if the column still
        holds it (a wait's end leaves alone what a newer wait of the same agent noted meanwhile)."""
        stmt = _P.update().where(_P.c.approval_id == approval_id)
        if noted is not None:
            stmt = stmt.where(_P.c.waited_until == noted)
        self.rows.conn.execute(stmt.values(waited_until=until))

    def count_pending(self) -> int:
        stmt = sa.select(sa.func.count()).where(_P.c.status == ApprovalStatus.PENDING)
        return int(self.rows.conn.execute(stmt).scalar_one())

    def count_unconfirmed(self, approved_before: datetime) -> int:
        """Actions still ``CLEARED`` whose approval was given before ``approved_before`` (all organisations)."""
        stmt = (
            sa.select(sa.func.count())
            .select_from(_P.join(_A, _A.c.action_id == _P.c.action_id))
            .where(
                _P.c.status == ApprovalStatus.APPROVED,
                _P.c.resolved_at <= approved_before,
                _A.c.status == ActionStatus.CLEARED,
            )
        )
        return int(self.rows.conn.execute(stmt).scalar_one())

    def due(self, now: datetime, limit: int = 500) -> list[Approval]:
        """Pending approvals whose time ran out by ``now``, soonest first."""
        stmt = sa.select(_P).where(_P.c.status == ApprovalStatus.PENDING, _P.c.timeout_at <= now)
        return self.rows.all(Approval, stmt.order_by(_P.c.timeout_at).limit(limit))

    def page(
        self,
        org_id: str,
        status: ApprovalStatus | None,
        limit: int | None = None,
        after: tuple[int, datetime, str] | None = None,
        opened_by: str | None = None,
    ) -> Joined:
        """The organisation's approvals, pending first and oldest first (the order a reviewer works in), each
        with its action and session; at most ``limit`` (all without it, read a thousand at a time), from after
        the keyset position ``after`` (:func:`approval_position` of the last approval of the previous page);
        ``opened_by``: only those of sessions this API key opened."""
        if limit is None:
            found: Joined = []
            while len(more := self.page(org_id, status, 1000, after, opened_by)) == 1000:
                found += more
                after = approval_position(more[-1][0])
            return found + more
        chosen = sa.select(_P.c.approval_id).where(_P.c.org_id == org_id)
        if opened_by is not None:
            own = sa.select(_S.c.session_id).where(_S.c.org_id == org_id, _S.c.opened_by_key == opened_by)
            chosen = chosen.where(_P.c.session_id.in_(own))
        # Pending first, then the others: each part read in order from the index on (org, status, requested)
        # as far as the page goes. One ORDER BY pending-first sorted every approval of the organisation.
        parts = [(0, _P.c.status == ApprovalStatus.PENDING), (1, _P.c.status != ApprovalStatus.PENDING)]
        if status is not None:
            parts = [(0 if status is ApprovalStatus.PENDING else 1, _P.c.status == status)]
        order = (_P.c.requested_at, _P.c.approval_id)
        ids: list[str] = []
        for place, part in parts:
            if len(ids) == limit or (after is not None and after[0] > place):
                continue
            read = chosen.where(part)
            if after is not None and after[0] == place:
                read = read.where(sa.tuple_(*order) > sa.tuple_(*after[1:]))
            ids += self.rows.conn.execute(read.order_by(*order).limit(limit - len(ids))).scalars()
        return self._joined(org_id, ids)

    def queue(self, org_id: str, decided: int, shown: int) -> tuple[Joined, Joined, int]:
        """The ``shown`` pending approvals a reviewer decides first (in the order of
        :func:`agentrein_core.read_models.queue_order`: those someone waits for first, then least time left first),
        the ``decided`` latest decisions (newest first), each with its action and session; and how many
        approvals are pending in all."""
        pending = sa.select(_P.c.approval_id).where(_P.c.org_id == org_id, _P.c.status == ApprovalStatus.PENDING)
        # Those someone waits for, then the others, least time left first: each purpose read in order from the
        # index on (org, status, purpose, timeout) as far as the queue goes, and merged. One ORDER BY over them
        # sorted every pending approval of the organisation (6 ms at 6,000).
        first: list[str] = []
        for purposes in (rules.BLOCKING_PURPOSES, set(ApprovalPurpose) - rules.BLOCKING_PURPOSES):
            left = shown - len(first)
            reads = (
                pending.with_only_columns(_P.c.timeout_at, _P.c.approval_id)
                .where(_P.c.purpose == purpose)
                .order_by(_P.c.timeout_at, _P.c.approval_id)
                .limit(left)
                for purpose in sorted(purposes)
            )
            merged = heapq.merge(*([(t, i) for t, i in self.rows.conn.execute(read)] for read in reads))
            first += [approval_id for _, approval_id in itertools.islice(merged, left)]
        decisions = sa.select(_P.c.approval_id).where(_P.c.org_id == org_id, _P.c.status != ApprovalStatus.PENDING)
        newest = decisions.order_by(_P.c.resolved_at.desc(), _P.c.approval_id.desc()).limit(decided)
        latest = list(self.rows.conn.execute(newest).scalars())
        count = self.rows.conn.execute(sa.select(sa.func.count()).select_from(pending.subquery())).scalar_one()
        return self._joined(org_id, first), self._joined(org_id, latest), int(count)

    def _joined(self, org_id: str, approval_ids: list[str]) -> Joined:
        """These approvals in this order, each with its action and session: found by their keys, in one query
        (the lists above choose them, ordered and limited among the approvals alone, through an index)."""
        stmt = (
            sa.select(_P, _A, _S)
            .join(_A, _A.c.action_id == _P.c.action_id)
            .join(_S, _S.c.session_id == _P.c.session_id)
            .where(_P.c.org_id == org_id, _P.c.approval_id.in_(approval_ids))
            .set_label_style(sa.LABEL_STYLE_TABLENAME_PLUS_COL)
        )
        result = self.rows.conn.execute(stmt)
        # Where each table's columns are in a row (labelled ``<table>_<column>``), found once per query, not
        # once per row and table.
        labels = list(result.keys())
        places = {
            table: [(i, label[len(table) + 1 :]) for i, label in enumerate(labels) if label.startswith(table + "_")]
            for table in ("approvals", "actions", "sessions")
        }

        def part(row: Any, table: str, cls: type[T]) -> T:
            return from_columns({column: row[i] for i, column in places[table]}, cls)

        joined = [
            (part(row, "approvals", Approval), part(row, "actions", Action), part(row, "sessions", Session))
            for row in result
        ]
        found = {approval.approval_id: (approval, action, session) for approval, action, session in joined}
        return [found[approval_id] for approval_id in approval_ids if approval_id in found]


def approval_position(approval: Approval) -> tuple[int, datetime, str]:
    """Where ``approval`` sorts in :meth:`Approvals.page`."""
    return (0 if approval.status is ApprovalStatus.PENDING else 1, approval.requested_at, approval.approval_id)

"""Rollback jobs: at most one under way per session, advanced by whichever worker holds its lease; and the undos
they hand to agent processes (:class:`~agentrein_core.model.UndoHandoff`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from attrs import frozen
from sqlalchemy.exc import IntegrityError

import agentrein_core.store.schema as schema
from agentrein_core import rules
from agentrein_core.model import Rollback, UndoHandoff
from agentrein_core.statuses import RollbackStatus
from agentrein_core.store.prepared import Prepared
from agentrein_core.store.rows import Rows, of_sessions

_R = schema.rollbacks
_H = schema.undo_handoffs
# Prepared: a confirmed call reads the session's latest rollback (a SUCCESS after a rollback began is undone
# too); 12 us against 63 us through SQLAlchemy's execute, on SQLite under load.
_LATEST = Prepared(
    sa.select(_R).where(_R.c.session_id == sa.bindparam("sid")).order_by(_R.c.created_at.desc()).limit(1)
)

# Read at every step of a rollback, built once (building a statement cost as much as running it).
_HANDOFF = sa.select(_H).where(_H.c.rollback_id == sa.bindparam("rid"), _H.c.action_id == sa.bindparam("aid"))
_HANDOFFS_OF = sa.select(_H).where(_H.c.action_id == sa.bindparam("aid"))


def _due(now: datetime) -> tuple[sa.ColumnElement[bool], ...]:
    """A rollback job a worker may take now: running, and nobody holds it (or the holder's lease ran out)."""
    return _R.c.status == RollbackStatus.RUNNING, sa.or_(_R.c.lease_until.is_(None), _R.c.lease_until < now)


@frozen
class Rollbacks:
    rows: Rows

    def get(self, org_id: str, rollback_id: str) -> Rollback | None:
        return self.rows.one(Rollback, rollback_id, org_id)

    def active(self, session_id: str) -> Rollback | None:
        stmt = sa.select(_R).where(_R.c.session_id == session_id, _R.c.status.in_(rules.ROLLBACK_UNDER_WAY))
        return self.rows.first(Rollback, stmt)

    def latest(self, session_id: str) -> Rollback | None:
        return self.rows.prepared_first(Rollback, _LATEST, {"sid": session_id})

    def of_sessions(self, session_ids: Sequence[str]) -> dict[str, list[Rollback]]:
        """The rollbacks of each session, oldest first, in one query."""
        return of_sessions(self.rows, Rollback, _R, session_ids, _R.c.created_at, _R.c.rollback_id)

    def update(self, rollback_id: str, values: dict[str, Any], **expected: Any) -> Rollback | None:
        """Set only ``values`` on the job if it still has the ``expected`` column values; the job as stored
        afterwards, or None if it did not match."""
        return self.rows.update(Rollback, rollback_id, values, **expected)

    def insert(self, job: Rollback) -> Rollback:
        """Insert ``job`` unless the session already has an unfinished rollback; return the one that runs."""
        try:
            with self.rows.conn.begin_nested():
                self.rows.insert(job)
        except IntegrityError:
            existing = self.active(job.session_id)
            if existing is None:  # the other one finished between our insert and this read
                raise
            return existing
        return job

    def claim_due(self, now: datetime, token: str, lease_until: datetime) -> Rollback | None:
        """Lease one running job whose lease is free or expired to ``token``; replicas claiming at once each
        get a different job, never the same."""
        due = sa.select(_R.c.rollback_id, _R.c.lease_token).where(*_due(now)).order_by(_R.c.created_at).limit(1)
        row = self.rows.conn.execute(self.rows.dialect.skip_locked(due)).first()
        if row is None:
            return None
        values = {"lease_token": token, "lease_until": lease_until}
        # Guarded by the lease it had, for SQLite (one writer at a time) and as a second lock on PostgreSQL.
        return self.update(row.rollback_id, values, lease_token=row.lease_token, status=RollbackStatus.RUNNING)

    def running(self, org_id: str | None, limit: int = 100) -> list[Rollback]:
        """Running jobs (of ``org_id`` only, when given), leased or not."""
        stmt = sa.select(_R).where(_R.c.status == RollbackStatus.RUNNING)
        if org_id is not None:
            stmt = stmt.where(_R.c.org_id == org_id)
        return self.rows.all(Rollback, stmt.order_by(_R.c.created_at).limit(limit))

    def due(self, org_id: str | None, now: datetime, limit: int = 100) -> list[Rollback]:
        """Running jobs whose lease is free or expired (a crashed worker's jobs included)."""
        stmt = sa.select(_R).where(*_due(now))
        if org_id is not None:
            stmt = stmt.where(_R.c.org_id == org_id)
        return self.rows.all(Rollback, stmt.order_by(_R.c.created_at).limit(limit))

    # undos handed to agent processes ---------------------------------------------------------------------
    def handoff(self, rollback_id: str, action_id: str) -> UndoHandoff | None:
        """The job's handoff of ``action_id``, if it offered one."""
        return self.rows.first(UndoHandoff, _HANDOFF, {"rid": rollback_id, "aid": action_id})

    def unsettled_handoff(self, rollback_id: str) -> UndoHandoff | None:
        """The job's latest handoff whose outcome has not come yet (a job waits on one at a time)."""
        stmt = sa.select(_H).where(_H.c.rollback_id == rollback_id, _H.c.outcome.is_(None))
        return self.rows.first(UndoHandoff, stmt.order_by(_H.c.offered_at.desc()).limit(1))

    def handoffs_of(self, action_id: str) -> list[UndoHandoff]:
        """Every handoff of the undo of ``action_id`` to the agent, by any rollback of its session (most have none),
        read from the action's own index: a session whose undos all ran in the agent's process has one each."""
        return self.rows.all(UndoHandoff, _HANDOFFS_OF, {"aid": action_id})

    def leased_handoff(self, org_id: str, action_id: str, lease_id: str) -> UndoHandoff | None:
        """The handoff of ``action_id`` that ``lease_id`` took."""
        stmt = sa.select(_H).where(_H.c.org_id == org_id, _H.c.action_id == action_id, _H.c.lease_id == lease_id)
        return self.rows.first(UndoHandoff, stmt)

    def offer(self, handoff: UndoHandoff) -> None:
        self.rows.insert(handoff)

    def open_handoff(
        self,
        org_id: str,
        session_ids: Sequence[str],
        connectors: Sequence[str],
        now: datetime,
        opened_by_key: str | None = None,
    ) -> UndoHandoff | None:
        """The oldest handoff of these sessions and connectors that no process has taken and may still be; with
        ``opened_by_key``, of the sessions that key opened only (:func:`agentrein_core.rules.acts_on`)."""
        stmt = (
            sa.select(_H)
            .where(
                _H.c.org_id == org_id,
                _H.c.session_id.in_(session_ids),
                _H.c.connector.in_(connectors),
                _H.c.outcome.is_(None),
                _H.c.lease_id.is_(None),
                _H.c.claim_by > now,
            )
            .order_by(_H.c.offered_at)
            .limit(1)
        )
        if opened_by_key is not None:
            _S = schema.sessions
            stmt = stmt.join(_S, _S.c.session_id == _H.c.session_id).where(_S.c.opened_by_key == opened_by_key)
        return self.rows.first(UndoHandoff, stmt)

    def any_active(self, session_ids: Sequence[str]) -> bool:
        """Whether one of these sessions has a rollback under way."""
        stmt = sa.select(_R.c.rollback_id).where(
            _R.c.session_id.in_(session_ids), _R.c.status.in_(rules.ROLLBACK_UNDER_WAY)
        )
        return self.rows.conn.execute(stmt.limit(1)).first() is not None

    def update_handoff(self, handoff_id: str, values: dict[str, Any], **expected: Any) -> UndoHandoff | None:
        """Set ``values`` on the handoff if it still has the ``expected`` column values (compare-and-set)."""
        return self.rows.update(UndoHandoff, handoff_id, values, **expected)

"""What tells the world about a change, and what checks it: events, webhooks and their deliveries, and intent
checks (verifications). Deliveries and checks are due work (``due_at``) that any worker claims."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, TypeVar

import sqlalchemy as sa
from attrs import frozen

import agentrein_core.store.schema as schema
from agentrein_core.model import Delivery, Event, Verification, Webhook
from agentrein_core.statuses import DeliveryStatus, VerificationOutcome
from agentrein_core.store.rows import TABLES, Rows

T = TypeVar("T")
_V, _W, _D, _E = schema.verifications, schema.webhooks, schema.deliveries, schema.events


def _claim_due(rows: Rows, cls: type[T], now: datetime, lease_until: datetime, *where: Any) -> T | None:
    """Take one ``cls`` record whose ``due_at`` has come, pushing its ``due_at`` to ``lease_until`` so that
    no other worker takes it meanwhile (a crashed worker's record comes due again then); workers claiming at
    once get different records."""
    table, key = TABLES[cls]
    due = (
        sa.select(table.c[key], table.c.due_at)
        .where(table.c.due_at.is_not(None), table.c.due_at <= now, *where)
        .order_by(table.c.due_at)
        .limit(1)
    )
    found = rows.conn.execute(rows.dialect.skip_locked(due)).first()
    if found is None:
        return None
    take = table.update().where(table.c[key] == found[0], table.c.due_at == found[1]).values(due_at=lease_until)
    if rows.conn.execute(take).rowcount != 1:
        return None  # taken by another worker between the two statements (SQLite)
    return rows.first(cls, sa.select(table).where(table.c[key] == found[0]))


@frozen
class Verifications:
    """Intent checks, each due (``due_at``) until a verifier answers it."""

    rows: Rows

    def get(self, org_id: str, verification_id: str) -> Verification | None:
        return self.rows.one(Verification, verification_id, org_id)

    def of_session(self, session_id: str) -> list[Verification]:
        stmt = sa.select(_V).where(_V.c.session_id == session_id).order_by(_V.c.created_at)
        return self.rows.all(Verification, stmt)

    def of_actions(self, session_id: str, action_ids: Sequence[str]) -> list[Verification]:
        """The checks of those of the session's actions (a page of them) and of the session as a whole, in one
        query."""
        of_them = sa.or_(_V.c.action_id.in_(action_ids), _V.c.action_id.is_(None))
        stmt = sa.select(_V).where(_V.c.session_id == session_id, of_them)
        return self.rows.all(Verification, stmt.order_by(_V.c.created_at))

    def has_due(self, now: datetime, org_id: str | None) -> bool:
        due = sa.select(_V.c.verification_id).where(_V.c.due_at.is_not(None), _V.c.due_at <= now)
        if org_id is not None:
            due = due.where(_V.c.org_id == org_id)
        return self.rows.conn.execute(due.limit(1)).first() is not None

    def next_due(self, org_id: str) -> datetime | None:
        """When the organisation's next check comes due (None: none is waiting)."""
        stmt = sa.select(_V.c.due_at).where(_V.c.org_id == org_id, _V.c.due_at.is_not(None)).order_by(_V.c.due_at)
        found: datetime | None = self.rows.conn.execute(stmt.limit(1)).scalar()
        return found

    def claim_due(self, now: datetime, lease_until: datetime, org_id: str | None) -> Verification | None:
        where = [_V.c.org_id == org_id] if org_id is not None else []
        return _claim_due(self.rows, Verification, now, lease_until, *where)

    def settle_due(self, org_id: str, now: datetime, until: datetime, rationale: str) -> None:
        """Record every check of the organisation due by ``until`` ``UNVERIFIED`` with ``rationale``."""
        self.rows.conn.execute(
            _V.update()
            .where(_V.c.org_id == org_id, _V.c.due_at.is_not(None), _V.c.due_at <= until)
            .values(
                outcome=VerificationOutcome.UNVERIFIED,
                rationale=rationale,
                verifier="",
                attempts=_V.c.attempts + 1,
                due_at=None,
                checked_at=now,
            )
        )


@frozen
class Webhooks:
    rows: Rows

    def get(self, org_id: str, webhook_id: str) -> Webhook | None:
        return self.rows.one(Webhook, webhook_id, org_id)

    def of_org(self, org_id: str) -> list[Webhook]:
        return self.rows.all(Webhook, sa.select(_W).where(_W.c.org_id == org_id).order_by(_W.c.created_at))

    def delete(self, org_id: str, webhook_id: str) -> bool:
        """Delete the webhook and its deliveries."""
        conn = self.rows.conn
        conn.execute(_D.delete().where(_D.c.webhook_id == webhook_id, _D.c.org_id == org_id))
        return conn.execute(_W.delete().where(_W.c.webhook_id == webhook_id, _W.c.org_id == org_id)).rowcount == 1


@frozen
class Deliveries:
    rows: Rows

    def of_webhook(self, org_id: str, webhook_id: str, limit: int) -> list[Delivery]:
        stmt = sa.select(_D).where(_D.c.org_id == org_id, _D.c.webhook_id == webhook_id)
        return self.rows.all(Delivery, stmt.order_by(_D.c.created_at.desc(), _D.c.delivery_id.desc()).limit(limit))

    def claim_due(self, now: datetime, lease_until: datetime) -> Delivery | None:
        return _claim_due(self.rows, Delivery, now, lease_until, _D.c.status == DeliveryStatus.PENDING)


@frozen
class Events:
    rows: Rows

    def get(self, event_id: str) -> Event | None:
        return self.rows.one(Event, event_id)

    def of_org(self, org_id: str, limit: int) -> list[Event]:
        stmt = sa.select(_E).where(_E.c.org_id == org_id).order_by(_E.c.created_at.desc(), _E.c.event_id.desc())
        return self.rows.all(Event, stmt.limit(limit))

    def undispatched(self, limit: int) -> list[Event]:
        stmt = sa.select(_E).where(_E.c.dispatched_at.is_(None)).order_by(_E.c.created_at, _E.c.event_id).limit(limit)
        return self.rows.all(Event, stmt)

    def mark_dispatched(self, event_ids: list[str], now: datetime) -> None:
        self.rows.conn.execute(
            _E.update().where(_E.c.event_id.in_(event_ids), _E.c.dispatched_at.is_(None)).values(dispatched_at=now)
        )

"""How long the outbox, the intent checks and the before-states are kept: what told the world about a change
(events, webhook deliveries), what checked it (intent verifications) and what a precapture read before it
(before-states: a reported call's undo carries what it restores, so they serve only until the call is reported;
those of held calls still waiting are kept)
are pruned once settled and older than the retention (``AGENTREIN_RETENTION_DAYS``, 30 by default). The records
of what agents did (sessions, actions, approvals, rollbacks) are never pruned here, nor the undo handoffs, which
record which undo an agent's process took (a later rollback reads them so as never to run such an undo in the
server too): one row per handed undo at most per rollback, growing no faster than the actions.

Each prune deletes a bounded batch through an index, so the maintenance worker that runs it never holds a
long transaction, however much has piled up; the next run takes the next batch.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import sqlalchemy as sa

from agentrein_core.environment import positive_number
from agentrein_core.statuses import ActionStatus, DeliveryStatus
from agentrein_core.store import Tx, schema

RETENTION_ENV = "AGENTREIN_RETENTION_DAYS"
DEFAULT_RETENTION = timedelta(days=30)
#: Rows deleted per table and prune: a few milliseconds of work, repeated at every maintenance.
BATCH = 500

_D, _E, _V, _B, _A = schema.deliveries, schema.events, schema.verifications, schema.before_states, schema.actions
_SETTLED = (DeliveryStatus.DELIVERED, DeliveryStatus.FAILED)
_UNSETTLED = (ActionStatus.PENDING_APPROVAL, ActionStatus.CLEARED)


def from_environment() -> timedelta:
    """``$AGENTREIN_RETENTION_DAYS``, a positive number of days (fractions allowed), else 30 days."""
    days = positive_number(RETENTION_ENV, "days")
    return timedelta(days=days) if days is not None else DEFAULT_RETENTION


def prune(tx: Tx, cutoff: datetime) -> int:
    """Delete a batch of settled deliveries, dispatched events no delivery still needs, answered intent checks
    and before-states (but those of held calls still waiting), all older than ``cutoff``; how many rows went."""
    deliveries = sa.select(_D.c.delivery_id).where(_D.c.status.in_(_SETTLED), _D.c.created_at < cutoff).limit(BATCH)
    gone = tx.conn.execute(_D.delete().where(_D.c.delivery_id.in_(deliveries))).rowcount
    still_delivered = sa.exists().where(_D.c.event_id == _E.c.event_id)
    events = sa.select(_E.c.event_id).where(_E.c.dispatched_at < cutoff, ~still_delivered).limit(BATCH)
    gone += tx.conn.execute(_E.delete().where(_E.c.event_id.in_(events))).rowcount
    checks = sa.select(_V.c.verification_id).where(_V.c.due_at.is_(None), _V.c.checked_at < cutoff).limit(BATCH)
    gone += tx.conn.execute(_V.delete().where(_V.c.verification_id.in_(checks))).rowcount
    # A held call may wait longer than the retention (approvals last up to a year): its before-state stays.
    waiting = sa.exists().where(_A.c.action_id == _B.c.action_id, _A.c.status.in_(_UNSETTLED))
    read_before = sa.select(_B.c.precapture_id).where(_B.c.captured_at < cutoff, ~waiting).limit(BATCH)
    gone += tx.conn.execute(_B.delete().where(_B.c.precapture_id.in_(read_before))).rowcount
    return int(gone)

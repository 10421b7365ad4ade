"""Persistence: one :class:`Store` per database, and :class:`Tx`, the unit of work every use case runs in, made
of one object per aggregate (``tx.sessions``, ``tx.actions``, ``tx.approvals``, ``tx.policies``,
``tx.rollbacks``, the accounts' and the outbox's), each in a module of its own; every difference between
SQLite and PostgreSQL is in :mod:`.dialect`.

Every state change is written with :meth:`Tx.replace`, an ``UPDATE … WHERE <key> AND <expected statuses>``:
if a concurrent writer changed the record first, no row matches and the caller learns it lost the race
(compare-and-set), so two decisions on one approval or two rollbacks of one session cannot both win.

On PostgreSQL the rows a transaction writes stay locked until it ends, so use cases take them in one order: **an
approval, then its action, then the session, then its rollback** (a decision writes its approval and then its action;
a rollback step its action and then its job). A use case that must write them the other way round first holds the
earlier ones: a failure or an undo recorded closes the action's reviews, so it first holds them
(:meth:`~.approvals.Approvals.hold_pending_of`); whoever starts or widens a rollback first holds the session
(:meth:`~.sessions.Sessions.hold`), so the unique "one rollback under way" index never waits on a session lock; a
sandbox session's rollback, done at once, writes all its actions and their reviews, so an operator's request, a
decision and a failure (which may start one) in a sandbox session first hold its actions' pending approvals and its
actions (:func:`~agentrein_core.engine.consequences.hold_before_rollback`). A sandbox rollback started by a late
success or an intent drift does not yet, and can still deadlock with those. Held rows are locked ``FOR NO KEY UPDATE``
(:meth:`~.rows.Rows.hold`): a foreign-key check (an action, approval, rollback or handoff inserted for the session)
never waits on them. Two transactions taking rows in opposite orders deadlock, and PostgreSQL ends one of them, which
is answered as an outage (503). A group commit holds the rows of several records at once, in no such order: its
records give way instead, after :data:`~.dialect.GROUP_LOCK_WAIT`, and are written again alone (:mod:`.group_commit`).
"""

from agentrein_core.store.changes import Change, Observer
from agentrein_core.store.connections import Store
from agentrein_core.store.dialect import EVENTS_CHANNEL
from agentrein_core.store.sessions import Listed, SeqTaken
from agentrein_core.store.transaction import Tx

__all__ = ["EVENTS_CHANNEL", "Change", "Listed", "Observer", "SeqTaken", "Store", "Tx"]

"""Persistence: one :class:`Store` per database, and :class:`Tx`, the unit of work every use case runs in, made
of one object per aggregate (``tx.sessions``, ``tx.actions``, ``tx.approvals``, ``tx.policies``,
``tx.rollbacks``, the accounts' and the outbox's), each in a module of its own; every difference between
SQLite and PostgreSQL is in :mod:`.dialect`.

Every state change is written with :meth:`Tx.replace`, an ``UPDATE … WHERE <key> AND <expected statuses>``:
if a concurrent writer changed the record first, no row matches and the caller learns it lost the race
(compare-and-set), so two decisions on one approval or two rollbacks of one session cannot both win.
"""

from agentrein_core.store.changes import Change, Observer
from agentrein_core.store.connections import Store
from agentrein_core.store.dialect import EVENTS_CHANNEL
from agentrein_core.store.sessions import Listed, SeqTaken
from agentrein_core.store.transaction import Tx

__all__ = ["EVENTS_CHANNEL", "Change", "Listed", "Observer", "SeqTaken", "Store", "Tx"]

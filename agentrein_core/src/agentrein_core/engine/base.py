"""What every area of use cases works with: how a waiting caller of this process is woken, the policy sets
recording reads, and the collaborators the engine is given.

:class:`UseCases` holds the collaborators :class:`~agentrein_core.engine.Engine` gives each of its areas (the
store, the clock, the installed connectors…); every area is an object of its own, made with them, and holds no
other area. What one use case causes in another area (a rollback, an approval, an event) is a function of
:mod:`~agentrein_core.engine.consequences`, run in the same transaction.
"""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import TYPE_CHECKING

from attrs import define

from agentrein_core import rules
from agentrein_core.store import Change, Store, Tx

if TYPE_CHECKING:
    from agentrein_core.clock import Clock
    from agentrein_core.model import Policy
    from agentrein_core.plugins import Connectors
    from agentrein_core.redaction import Redactors

#: How often a waiting long-poll looks again by itself, for changes made where no notification reaches this
#: process (another process on the same SQLite file)...
RECHECK_EVERY = 1.0
#: ...and while this process listens to PostgreSQL's NOTIFY, which wakes it at once (a safety net only).
LISTENING_RECHECK = 5.0


class Waiters:
    """Callers of this process waiting for an approval to be decided or a rollback to move. Every committed
    decision or rollback change wakes them (:meth:`observe`); each then looks again."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._changed = threading.Condition()

    def observe(self, changes: frozenset[Change]) -> None:
        if Change.DECISION in changes or Change.ROLLBACK in changes:
            with self._changed:
                self._changed.notify_all()

    def wait(self, remaining: float) -> None:
        """Sleep until woken, at most ``remaining`` seconds (and no longer than a look-again interval)."""
        recheck = LISTENING_RECHECK if self._store.listening else RECHECK_EVERY
        with self._changed:
            self._changed.wait(min(remaining, recheck))


class PolicySets:
    """Each organisation's enabled policies, read again only when their version has moved (any process that
    changes a policy bumps it in the same transaction), so recording a call reads no policy rows."""

    def __init__(self) -> None:
        self._by_org: dict[str, tuple[int, list[Policy]]] = {}
        self._lock = threading.Lock()

    def enabled(self, tx: Tx, org_id: str, version: int) -> list[Policy]:
        with self._lock:
            cached = self._by_org.get(org_id)
        if cached is not None and cached[0] == version:
            return cached[1]
        enabled = tx.policies.enabled(org_id)
        with self._lock:
            self._by_org[org_id] = (version, enabled)
        return enabled


class RecentConnectors:
    """The connector of each action this process recorded lately, so that confirming one (its response is
    redacted by its connector's rules) need not read its record first. An action's connector never changes;
    an action not found here (recorded by another process, or long ago) is read as before."""

    #: How many are kept: the calls in flight at once, with a wide margin.
    KEPT = 10_000

    def __init__(self) -> None:
        self._by_action: dict[str, str] = {}
        self._lock = threading.Lock()

    def remember(self, action_id: str, connector: str) -> None:
        with self._lock:
            if len(self._by_action) >= self.KEPT:
                del self._by_action[next(iter(self._by_action))]  # the oldest
            self._by_action[action_id] = connector

    def take(self, action_id: str) -> str | None:
        with self._lock:
            return self._by_action.pop(action_id, None)


@define
class UseCases:
    """Base of the use-case areas: the collaborators the engine shares among them, given to each area when the
    engine makes it."""

    store: Store
    clock: Clock
    #: The installed connectors: they check the undo configs agents send before they are stored.
    connectors: Connectors | None
    #: Each connector's redaction rules: whatever a client sent, nothing is stored unredacted (DESIGN §4).
    redactors: Redactors
    #: How long a worker holds a rollback job between steps; a crashed worker's job waits this long.
    rollback_lease: timedelta
    #: Pauses between attempts of a webhook delivery.
    delivery_retry_after: tuple[timedelta, ...]
    #: How long settled events, deliveries and intent checks are kept.
    retention: timedelta
    waiters: Waiters
    policy_sets: PolicySets
    recent_connectors: RecentConnectors
    #: How long an undo handed to the agent's process waits to be taken, and how long its taker has.
    agent_undo_wait: timedelta = rules.AGENT_UNDO_WAIT
    agent_undo_lease: timedelta = rules.AGENT_UNDO_LEASE

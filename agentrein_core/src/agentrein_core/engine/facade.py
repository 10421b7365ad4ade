"""The engine: AgentRein's use cases over one :class:`~agentrein_core.store.Store`, the one object the
embedded SDK, the server and its workers call. It is composed of its areas, each an object made of the
collaborators they share and living in a module of its own: ``engine.accounts`` (:mod:`.accounts`),
``engine.recording`` (:mod:`.recording`), ``engine.reviews`` (:mod:`.reviews`), ``engine.policies``
(:mod:`.policies`), ``engine.rollbacks`` (:mod:`.rollbacks`), ``engine.outbox`` (:mod:`.outbox`),
``engine.intent_checks`` (:mod:`.intent_checks`) and ``engine.maintenance`` (:mod:`.maintenance`). No area holds
another, so what one causes in another is written once, in :mod:`.consequences`.

Each use case is one transaction: it reads the records it needs, asks :mod:`agentrein_core.rules`,
:mod:`agentrein_core.policies` and :mod:`agentrein_core.rollback` what may happen, and writes the outcome
guarded by the statuses it read. Losing a race raises :class:`InvalidTransitionError`; nothing is half-written.
"""

from __future__ import annotations

from datetime import timedelta

from attrs import asdict

from agentrein_core import notifications, rules
from agentrein_core.clock import Clock, utcnow
from agentrein_core.engine.accounts import Accounts
from agentrein_core.engine.base import PolicySets, RecentConnectors, UseCases, Waiters
from agentrein_core.engine.intent_checks import IntentChecking
from agentrein_core.engine.maintenance import Maintenance
from agentrein_core.engine.outbox import Outbox
from agentrein_core.engine.policies import PolicyRules
from agentrein_core.engine.recording import Recording
from agentrein_core.engine.reviews import Reviews
from agentrein_core.engine.rollbacks import ROLLBACK_LEASE, Rollbacks
from agentrein_core.plugins import Connectors
from agentrein_core.redaction import Redactors
from agentrein_core.retention import from_environment as retention_from_environment
from agentrein_core.store import Store


class Engine:
    """AgentRein's use cases over one :class:`Store`. Thread-safe; share one per process.

    ``connectors`` (the installed ones) check the undo configs agents send before they are stored;
    ``rollback_lease`` is how long a worker holds a rollback job between steps (a crashed worker's job waits
    this long); ``delivery_retry_after`` are the pauses between attempts of a webhook delivery; ``retention``
    is how long settled events, deliveries and intent checks are kept (default: ``$AGENTREIN_RETENTION_DAYS``,
    else 30 days); ``agent_undo_wait`` how long an undo handed to the agent's process waits to be taken."""

    def __init__(
        self,
        store: Store,
        clock: Clock = utcnow,
        *,
        connectors: Connectors | None = None,
        rollback_lease: timedelta = ROLLBACK_LEASE,
        delivery_retry_after: tuple[timedelta, ...] = notifications.RETRY_AFTER,
        retention: timedelta | None = None,
        agent_undo_wait: timedelta = rules.AGENT_UNDO_WAIT,
    ) -> None:
        self.store = store
        self.clock = clock
        self.connectors = connectors
        self.redactors = (
            Redactors(connectors.sensitive_fields, connectors.every_sensitive_field())
            if connectors is not None
            else Redactors(lambda name: ())
        )
        shared = UseCases(
            store=store,
            clock=clock,
            connectors=connectors,
            redactors=self.redactors,
            rollback_lease=rollback_lease,
            delivery_retry_after=delivery_retry_after,
            retention=retention or retention_from_environment(),
            waiters=Waiters(store),
            policy_sets=PolicySets(),
            recent_connectors=RecentConnectors(),
            agent_undo_wait=agent_undo_wait,
        )
        store.observe(shared.waiters.observe)
        given = asdict(shared, recurse=False)
        self.accounts = Accounts(**given)
        self.recording = Recording(**given)
        self.reviews = Reviews(**given)
        self.policies = PolicyRules(**given)
        self.rollbacks = Rollbacks(**given)
        self.outbox = Outbox(**given)
        self.intent_checks = IntentChecking(**given)
        self.maintenance = Maintenance(**given)

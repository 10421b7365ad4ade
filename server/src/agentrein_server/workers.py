"""The server's background work: the core's supervisor (:mod:`agentrein_core.supervisor`), run with the
server's parts. Rollback jobs of every organisation are claimed by ``rollback_threads`` threads (leases;
``FOR UPDATE SKIP LOCKED`` on PostgreSQL) and their inverses run through the organisation's connector
settings (:mod:`agentrein_core.settings_undo`); intent checks, webhook deliveries and the ``agentrein_notify``
plugins have a thread each; on PostgreSQL a listener turns other replicas' NOTIFYs into wake-ups of this
replica's long-polls. Each rollback that ends is counted in the server's metrics.
"""

from __future__ import annotations

from collections.abc import Callable

from agentrein_core.engine import Engine
from agentrein_core.model import Event, Rollback
from agentrein_core.rollback import UndoExecutor
from agentrein_core.supervisor import SERVER, Supervisor
from agentrein_core.verifier_plugins import IntentChecks
from agentrein_server import metrics
from agentrein_server.webhooks import WebhookSender


class Workers:
    def __init__(
        self,
        engine: Engine,
        executor: UndoExecutor,
        rollback_threads: int = 2,
        *,
        checks: IntentChecks | None = None,
        sender: WebhookSender | None = None,
        notify: Callable[[Event], None] | None = None,
    ) -> None:
        self.engine = engine
        self.executor = executor
        self.checks = checks
        self.sender = sender
        self.supervisor = Supervisor(
            engine,
            executor,
            schedule=SERVER,
            rollback_threads=rollback_threads,
            checks=checks,
            sender=sender,
            notify=notify,
            rollback_ended=_count,
            listen=True,
        )

    def start(self, *, background: bool = True) -> None:
        """Start the supervisor. ``background=False``: only its listener (a server process beside the one that
        runs the background work, whose long-polls still wake at once)."""
        self.supervisor.start(background=background)

    def stop(self) -> None:
        self.supervisor.stop()


def _count(job: Rollback) -> None:
    metrics.ROLLBACKS_FINISHED.labels(outcome=job.status.lower()).inc()

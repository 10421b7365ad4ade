"""Prometheus metrics: request counts and latencies (Litestar's Prometheus middleware), and AgentRein's own."""

from __future__ import annotations

from litestar.plugins.prometheus import PrometheusConfig
from prometheus_client import Counter, Gauge

from agentrein_core.engine import Engine

ACTIONS_LOGGED = Counter(
    "agentrein_actions_logged", "Side-effecting calls recorded (write-ahead), by their first status", ["status"]
)
APPROVALS_PENDING = Gauge("agentrein_approvals_pending", "Approval requests waiting for a decision (all organisations)")
ACTIONS_UNCONFIRMED = Gauge(
    "agentrein_actions_unconfirmed",
    "Approved actions whose execution was not confirmed within an hour (all organisations)",
)
ROLLBACKS_FINISHED = Counter(
    "agentrein_rollbacks_finished", "Rollback jobs finished by this server, by outcome", ["outcome"]
)


def refresh(engine: Engine) -> None:
    """Read the gauges that count records (the workers call this every second, ``/metrics`` before it answers)."""
    APPROVALS_PENDING.set(engine.count_pending_approvals())
    ACTIONS_UNCONFIRMED.set(engine.count_unconfirmed())


#: Request metrics, labelled by route template (not by the ids in the path).
prometheus = PrometheusConfig(app_name="agentrein", prefix="agentrein", group_path=True, exclude=["/metrics"])

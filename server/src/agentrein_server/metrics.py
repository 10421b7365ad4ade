"""Prometheus metrics: request counts and latencies (Litestar's Prometheus middleware), and AgentRein's own."""

from __future__ import annotations

from litestar.plugins.prometheus import PrometheusConfig
from prometheus_client import Counter, Gauge

ACTIONS_LOGGED = Counter(
    "agentrein_actions_logged", "Side-effecting calls recorded (write-ahead), by their first status", ["status"]
)
APPROVALS_PENDING = Gauge("agentrein_approvals_pending", "Approval requests waiting for a decision (all organisations)")
ROLLBACKS_FINISHED = Counter(
    "agentrein_rollbacks_finished", "Rollback jobs finished by this server, by outcome", ["outcome"]
)

#: Request metrics, labelled by route template (not by the ids in the path).
prometheus = PrometheusConfig(app_name="agentrein", prefix="agentrein", group_path=True, exclude=["/metrics"])

"""Liveness and metrics: no API key needed."""

from __future__ import annotations

from typing import Any

from litestar import Response, get
from prometheus_client import REGISTRY, generate_latest

from agentrein_server import metrics
from agentrein_server.services import ServicesDep

#: Prometheus' text format (Litestar adds the charset).
PROMETHEUS_TEXT = "text/plain; version=0.0.4"


@get("/healthz", sync_to_thread=True, tags=["system"])
def healthz(services: ServicesDep) -> dict[str, Any]:
    """``200`` when the database answers."""
    services.engine.count_pending_approvals()  # a real query: the database is reachable
    return {"status": "ok", "database": services.engine.store.dialect}


@get("/metrics", sync_to_thread=True, tags=["system"], media_type=PROMETHEUS_TEXT)
def prometheus_metrics(services: ServicesDep) -> Response[bytes]:
    """Prometheus text format."""
    metrics.refresh(services.engine)
    return Response(generate_latest(REGISTRY), media_type=PROMETHEUS_TEXT)

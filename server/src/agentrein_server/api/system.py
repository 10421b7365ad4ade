"""Liveness and metrics: no API key needed. ``/metrics`` shows figures for every organisation together, so
it answers only a scraper holding ``$AGENTREIN_METRICS_TOKEN`` or, while that is unset, a loopback client."""

from __future__ import annotations

import hmac
import ipaddress
import os
from typing import Any

from litestar import Request, Response, get
from prometheus_client import REGISTRY, generate_latest

from agentrein_core.errors import ForbiddenError, UnauthorizedError
from agentrein_server import metrics
from agentrein_server.api import answers
from agentrein_server.problems import documented
from agentrein_server.services import ServicesDep

METRICS_TOKEN_ENV = "AGENTREIN_METRICS_TOKEN"

#: Prometheus' text format (Litestar adds the charset).
PROMETHEUS_TEXT = "text/plain; version=0.0.4"


@get(
    "/healthz",
    sync_to_thread=True,
    tags=["system"],
    operation_id="checkHealth",
    summary="Check that the server and its database answer",
    responses=documented(key=False),
)
def healthz(services: ServicesDep) -> answers.Health:
    """``200`` when the database answers."""
    services.engine.reviews.count_pending_approvals()  # a real query: the database is reachable
    return {"status": "ok", "database": services.engine.store.dialect}


def may_scrape(request: Request[Any, Any, Any]) -> None:
    """With ``$AGENTREIN_METRICS_TOKEN`` set, ``Authorization: Bearer <token>`` from anywhere; unset, loopback
    clients only (uvicorn takes a local reverse proxy's ``X-Forwarded-For``, so what it forwards is not
    loopback)."""
    token = os.environ.get(METRICS_TOKEN_ENV, "")
    if token:
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
            raise UnauthorizedError(f"send the scrape token (${METRICS_TOKEN_ENV}) as 'Authorization: Bearer <token>'")
    elif not _is_loopback(request.client.host if request.client else ""):
        raise ForbiddenError(f"/metrics answers loopback clients only; set ${METRICS_TOKEN_ENV} to scrape from afar")


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@get(
    "/metrics",
    sync_to_thread=True,
    tags=["system"],
    media_type=PROMETHEUS_TEXT,
    # The token only while $AGENTREIN_METRICS_TOKEN is set ({}: none, for a loopback client while it is not).
    security=[{"metricsToken": []}, {}],
    operation_id="scrapeMetrics",
    summary="Scrape Prometheus metrics",
    responses=documented(UnauthorizedError, ForbiddenError, key=False),
)
def prometheus_metrics(request: Request[Any, Any, Any], services: ServicesDep) -> Response[bytes]:
    """Prometheus text format, for every organisation together: with ``$AGENTREIN_METRICS_TOKEN`` set,
    ``Authorization: Bearer <token>``; unset, loopback clients only."""
    may_scrape(request)
    metrics.refresh(services.engine)
    return Response(generate_latest(REGISTRY), media_type=PROMETHEUS_TEXT)

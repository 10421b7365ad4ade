"""Prometheus metrics: request counts and latencies, and AgentRein's own."""

from __future__ import annotations

import time
from typing import Any

from litestar.enums import ScopeType
from litestar.types import ASGIApp, Message, Receive, Scope, Send
from prometheus_client import Counter, Gauge, Histogram

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
    """Read the gauges that count records: ``/metrics`` calls this before it answers (counting every approved
    action of every organisation grows with the history, so it is not done every second for nobody)."""
    APPROVALS_PENDING.set(engine.reviews.count_pending_approvals())
    ACTIONS_UNCONFIRMED.set(engine.reviews.count_unconfirmed())


# Request metrics, labelled by route template (not by the ids in the path): the names, labels and documentation
# of Litestar's Prometheus middleware, which this replaces (it cost a request object, four label dictionaries
# and four label lookups per request; here a route's label children are looked up once).
APP_NAME = "agentrein"
_LABELS = ("method", "path", "status_code", "app_name")
REQUESTS = Counter("agentrein_requests_total", "Total requests", _LABELS)
REQUEST_TIME = Histogram("agentrein_request_duration_seconds", "Request duration, in seconds", _LABELS)
IN_PROGRESS = Gauge(
    "agentrein_requests_in_progress", "Total requests currently in progress", _LABELS, multiprocess_mode="livesum"
)
ERRORS = Counter("agentrein_requests_error_total", "Total errors in requests", _LABELS)
#: Routes not counted: the scrape itself.
UNCOUNTED = frozenset({"/metrics"})


class RequestMetrics:
    """ASGI middleware counting each routed request by method, route template and status."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._in_progress: dict[tuple[str, str], Any] = {}
        self._ended: dict[tuple[str, str, int], tuple[Any, Any, Any]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope.get("path_template", scope["path"])
        if scope["type"] != ScopeType.HTTP or path in UNCOUNTED:
            await self.app(scope, receive, send)
            return
        method = scope["method"]
        status = 200

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        in_progress = self._in_progress.get((method, path))
        if in_progress is None:
            # Litestar's middleware labelled the gauge with the status it starts from, 200: kept, for dashboards
            in_progress = self._in_progress[method, path] = IN_PROGRESS.labels(method, path, 200, APP_NAME)
        started = time.perf_counter()
        in_progress.inc()
        try:
            await self.app(scope, receive, sending)
        finally:
            in_progress.dec()
            ended = self._ended.get((method, path, status))
            if ended is None:
                ended = self._ended[method, path, status] = (
                    REQUESTS.labels(method, path, status, APP_NAME),
                    REQUEST_TIME.labels(method, path, status, APP_NAME),
                    ERRORS.labels(method, path, status, APP_NAME) if status >= 500 else None,
                )
            count, duration, errors = ended
            count.inc()
            duration.observe(time.perf_counter() - started)
            if errors is not None:
                errors.inc()

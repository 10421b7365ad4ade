"""The AgentRein server: a Litestar app over one :class:`~agentrein_core.engine.Engine`.

Layers, outermost first: HTTP (routes in :mod:`agentrein_server.api`, problem+json in
:mod:`~agentrein_server.problems`), who is calling (:mod:`~agentrein_server.auth`), then the engine's use
cases, the same ones the embedded SDK calls. Background work runs in :mod:`~agentrein_server.workers`; the
reviewer dashboard (:mod:`~agentrein_server.dashboard`) is served under ``/dashboard``.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from litestar import Litestar, Request, Response, Router
from litestar.concurrency import get_asyncio_executor, set_asyncio_executor
from litestar.datastructures import State
from litestar.di import Provide
from litestar.enums import HttpMethod
from litestar.exceptions import HTTPException
from litestar.routes import HTTPRoute
from litestar.status_codes import HTTP_204_NO_CONTENT

from agentrein_core import redaction, rules
from agentrein_core.engine import Engine
from agentrein_core.engine.configuration import Configuration, vault_of
from agentrein_core.engine.rollbacks import AGENT_UNDO_LEASE_ENV, lease_from_environment
from agentrein_core.plugins import Connectors, installed_connectors
from agentrein_core.settings_undo import SettingsUndoExecutor
from agentrein_core.store import Store
from agentrein_core.vault import Vault
from agentrein_core.verifier_plugins import IntentChecks
from agentrein_server import metrics, problems
from agentrein_server.api import bodies, docs
from agentrein_server.api.approvals import ApprovalController
from agentrein_server.api.connectors import ConnectorController
from agentrein_server.api.keys import ApiKeyController
from agentrein_server.api.policies import PolicyController
from agentrein_server.api.sessions import SessionController
from agentrein_server.api.settings import SettingsController
from agentrein_server.api.system import healthz, prometheus_metrics
from agentrein_server.api.undos import UndoController
from agentrein_server.api.webhooks import WebhookController
from agentrein_server.auth import Authenticator, Caller
from agentrein_server.compat import compat_router
from agentrein_server.dashboard.rendering import template_config
from agentrein_server.dashboard.router import dashboard_router, error_page, is_dashboard, root
from agentrein_server.services import Services, ServicesDep, provide_services
from agentrein_server.webhooks import WebhookSender
from agentrein_server.workers import Workers

log = logging.getLogger("agentrein.server")

#: Request bodies larger than this are refused with 413 before they are read in full.
MAX_BODY_BYTES = 1024 * 1024
#: Threads for the (synchronous) request handlers; a long-poll holds one while it waits, so there must be
#: many more than there are cores.
HANDLER_THREADS = 200


def open_services(
    database_url: str | None = None,
    *,
    rollback_threads: int = 2,
    vault: Vault | None = None,
    connectors: Connectors | None = None,
) -> Services:
    """Open the database (migrating it) and make what the handlers and workers share."""
    store = Store(database_url)
    connectors = connectors or installed_connectors()
    engine = Engine(
        store,
        connectors=connectors,
        rollback_lease=lease_from_environment(),
        agent_undo_lease=lease_from_environment(AGENT_UNDO_LEASE_ENV, rules.AGENT_UNDO_LEASE),
    )
    redaction.redact_logs(engine.redactors.common, redaction.REQUEST_LOGGERS)
    vault = vault or vault_of(store.url, store.dialect)
    undo = SettingsUndoExecutor(engine, connectors, vault.decrypt)
    workers = Workers(
        engine,
        undo,
        rollback_threads,
        checks=IntentChecks(engine, connectors, vault.decrypt_text),
        sender=WebhookSender(engine, vault),
        notify=connectors.notify,
    )
    configuration = Configuration(engine, connectors, vault)
    return Services(engine, connectors, vault, workers, Authenticator(engine), undo, configuration)


def _problem_or_page(request: Request, exc: HTTPException) -> Response[Any]:  # type: ignore[type-arg]
    """Errors raised before a route is found (an unknown path): a page under the dashboard, else problem+json."""
    return error_page(request, exc) if is_dashboard(request) else problems.http_error(request, exc)


async def _before_request(request: Request) -> Response[None] | None:  # type: ignore[type-arg]
    """OPTIONS is answered here; the REST API takes JSON bodies only (the dashboard's forms are form-encoded)."""
    if request.method == HttpMethod.OPTIONS:
        return _options(request)
    if not is_dashboard(request):
        await bodies.require_json(request)
    return None


def _options(request: Request) -> Response[None]:  # type: ignore[type-arg]
    """What a path allows: every method of its route. Litestar 2's own answer lists the methods of the path's
    first controller method only (litestar-org/litestar#4169, fixed in Litestar 3)."""
    template = request.scope["path_template"]
    methods = {
        method
        for route in request.app.routes
        if isinstance(route, HTTPRoute) and route.path_format == template
        for method in route.methods
    }
    return Response(None, status_code=HTTP_204_NO_CONTENT, headers={"Allow": ", ".join(sorted(methods))})


def create_app(services: Services, *, run_workers: bool = True) -> Litestar:
    """The ASGI app. ``run_workers=False`` serves requests only (rollbacks then wait for a replica, or the
    server process, that runs workers); on PostgreSQL it still listens for other processes' changes, so that
    its long-polls wake at once."""

    def provide_caller(request: Request, services: ServicesDep) -> Caller:  # type: ignore[type-arg]
        return services.authenticator(request)

    if get_asyncio_executor() is None:  # process-wide, and settable only outside the event loop
        set_asyncio_executor(ThreadPoolExecutor(HANDLER_THREADS, thread_name_prefix="agentrein-request"))

    def start() -> None:
        services.workers.start(background=run_workers)

    def stop() -> None:
        services.workers.stop()
        if services.workers.sender is not None:
            services.workers.sender.close()
        services.engine.store.close()

    return Litestar(
        route_handlers=[
            Router(
                "/",
                route_handlers=[
                    SessionController,
                    UndoController,
                    ApprovalController,
                    PolicyController,
                    ConnectorController,
                    ApiKeyController,
                    SettingsController,
                    WebhookController,
                ],
                security=docs.API_KEY,
            ),
            compat_router(),
            healthz,
            prometheus_metrics,
            root,
            dashboard_router(services.vault),
            docs.assets(),
        ],
        dependencies={
            "services": Provide(provide_services, sync_to_thread=False),
            "caller": Provide(provide_caller, sync_to_thread=False),
        },
        state=State({"services": services}),
        exception_handlers={**problems.HANDLERS, HTTPException: _problem_or_page},
        middleware=[metrics.RequestMetrics],
        request_class=bodies.JsonRequest,
        before_request=_before_request,
        on_startup=[start],
        on_shutdown=[stop],
        request_max_body_size=MAX_BODY_BYTES,
        template_config=template_config(),
        openapi_config=docs.openapi_config(),
        plugins=docs.SCHEMA_PLUGINS,
        debug=False,
    )

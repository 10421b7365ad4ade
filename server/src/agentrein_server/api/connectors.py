"""Connectors: which are installed, and the organisation's settings for running their inverses in the
server. Credentials are write-only: stored encrypted, never returned."""

from __future__ import annotations

from litestar import Controller, get, put
from litestar.params import FromPath, JSONBody

from agentrein_core.engine.configuration import shown
from agentrein_core.errors import ForbiddenError, NotFoundError, ValidationError
from agentrein_server.api import answers, bodies
from agentrein_server.problems import documented
from agentrein_server.services import CallerDep, ServicesDep


class ConnectorController(Controller):
    path = "/connectors"
    tags = ("connectors",)

    @get(
        sync_to_thread=True, operation_id="listConnectors", summary="List installed connectors", responses=documented()
    )
    def list(self, caller: CallerDep, services: ServicesDep) -> answers.Connectors:
        """Every installed connector, with the organisation's settings for it."""
        return services.configuration.connectors_of(caller.org_id)

    @get(
        "/{name:str}",
        sync_to_thread=True,
        operation_id="getConnector",
        summary="Show a connector's settings",
        responses=documented(ValidationError, NotFoundError),
    )
    def show(self, name: FromPath[str], caller: CallerDep, services: ServicesDep) -> answers.Connector:
        if name not in services.connectors.names():
            raise NotFoundError("installed connector", name, key="name")
        return shown(name, services.engine.accounts.connector_config(caller.org_id, name))

    @put(
        "/{name:str}",
        sync_to_thread=True,
        operation_id="configureConnector",
        summary="Configure a connector for server-side rollback",
        responses=documented(ForbiddenError, NotFoundError, body=True),
    )
    def configure(
        self, name: FromPath[str], data: JSONBody[bodies.ConnectorSettings], caller: CallerDep, services: ServicesDep
    ) -> answers.Connector:
        """Enable (or disable) the connector for server-side rollback. ``credentials`` omitted keeps the
        stored ones."""
        caller.require_operator("configure connectors")
        stored = services.configuration.configure_connector(
            caller.org_id, name, enabled=data.enabled, config=data.config, credentials=data.credentials
        )
        return shown(name, stored)

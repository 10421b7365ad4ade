"""Connectors: which are installed, and the organisation's settings for running their inverses in the
server. Credentials are write-only: stored encrypted, never returned."""

from __future__ import annotations

from typing import Any

from litestar import Controller, get, put
from litestar.params import FromPath, JSONBody

from agentrein_core.errors import ForbiddenError, NotFoundError, ValidationError
from agentrein_core.model import ConnectorConfig
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
        stored = {c.connector: c for c in services.engine.list_connector_configs(caller.org_id)}
        return [describe(name, stored.get(name)) for name in services.connectors.names()]

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
        return describe(name, services.engine.connector_config(caller.org_id, name))

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
        stored = services.configure_connector(
            caller.org_id, name, enabled=data.enabled, config=data.config, credentials=data.credentials
        )
        return describe(name, stored)


def describe(name: str, stored: ConnectorConfig | None) -> dict[str, Any]:
    """A connector's settings as shown (``agentrein connectors`` on a database shows them the same way)."""
    return {
        "name": name,
        "enabled": bool(stored and stored.enabled),
        "config": stored.config if stored else {},
        "hasCredentials": bool(stored and stored.credentials),
        "updatedAt": stored.updated_at.isoformat() if stored else None,
    }

"""API keys of the caller's organisation. A new key's secret is in the creation response only."""

from __future__ import annotations

from litestar import Controller, delete, get, post
from litestar.params import FromPath, JSONBody

from agentrein_core.errors import ForbiddenError, NotFoundError, ValidationError
from agentrein_core.read_models import api_key_shown
from agentrein_server.api import answers, bodies
from agentrein_server.problems import documented
from agentrein_server.services import CallerDep, ServicesDep


class ApiKeyController(Controller):
    path = "/api-keys"
    tags = ("api keys",)

    @post(
        sync_to_thread=True,
        operation_id="createApiKey",
        summary="Create an API key",
        responses=documented(ForbiddenError, body=True),
    )
    def create(
        self, data: JSONBody[bodies.NewApiKey], caller: CallerDep, services: ServicesDep
    ) -> answers.CreatedApiKey:
        caller.require_operator("create API keys")
        key, secret = services.engine.accounts.create_api_key(caller.org_id, data.role)
        return api_key_shown(key) | {"key": secret}

    @delete(
        "/{key_id:str}",
        sync_to_thread=True,
        operation_id="revokeApiKey",
        summary="Revoke an API key",
        responses=documented(ValidationError, ForbiddenError, NotFoundError),
    )
    def revoke(self, key_id: FromPath[str], caller: CallerDep, services: ServicesDep) -> None:
        """The key stops working: at once on this server, within seconds on the others."""
        caller.require_operator("revoke API keys")
        services.revoke_api_key(caller.org_id, key_id)

    @get(sync_to_thread=True, operation_id="listApiKeys", summary="List API keys", responses=documented(ForbiddenError))
    def list(self, caller: CallerDep, services: ServicesDep) -> answers.ApiKeys:
        caller.require_operator("list API keys")
        return [api_key_shown(k) for k in services.engine.accounts.list_api_keys(caller.org_id)]

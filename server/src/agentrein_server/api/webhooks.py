"""Webhooks: endpoints the organisation registers for events, and each one's delivery log. The signing
secret is shown once, when the webhook is made (stored encrypted after)."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Controller, delete, get, post
from litestar.params import FromPath, JSONBody, QueryParameter

from agentrein_core.converter import to_wire
from agentrein_core.errors import ForbiddenError, NotFoundError, ValidationError
from agentrein_core.model import Webhook
from agentrein_server.api import answers, bodies
from agentrein_server.problems import documented
from agentrein_server.services import CallerDep, ServicesDep


class WebhookController(Controller):
    path = "/webhooks"
    tags = ("webhooks",)

    @post(
        sync_to_thread=True,
        operation_id="addWebhook",
        summary="Register a webhook",
        responses=documented(ForbiddenError, body=True),
    )
    def create(
        self, data: JSONBody[bodies.NewWebhook], caller: CallerDep, services: ServicesDep
    ) -> answers.CreatedWebhook:
        """Register an endpoint. Its host must be among the settings' ``webhookHosts``. The answer carries the
        signing ``secret``; no later answer does."""
        caller.require_operator("register webhooks")
        hook, secret = services.configuration.add_webhook(
            caller.org_id, data.url, data.events, data.secret, data.format
        )
        return _describe(hook) | {"secret": secret}

    @get(
        sync_to_thread=True, operation_id="listWebhooks", summary="List webhooks", responses=documented(ForbiddenError)
    )
    def index(self, caller: CallerDep, services: ServicesDep) -> answers.Webhooks:
        caller.require_operator("list webhooks")  # a URL can itself be a secret (Slack's are)
        return [_describe(h) for h in services.engine.outbox.list_webhooks(caller.org_id)]

    @delete(
        "/{webhook_id:str}",
        sync_to_thread=True,
        operation_id="deleteWebhook",
        summary="Remove a webhook",
        responses=documented(ValidationError, ForbiddenError, NotFoundError),
    )
    def remove(self, webhook_id: FromPath[str], caller: CallerDep, services: ServicesDep) -> None:
        caller.require_operator("remove webhooks")
        services.engine.outbox.delete_webhook(caller.org_id, webhook_id)

    @get(
        "/{webhook_id:str}/deliveries",
        sync_to_thread=True,
        operation_id="listDeliveries",
        summary="List a webhook's deliveries",
        responses=documented(ValidationError, ForbiddenError, NotFoundError),
    )
    def deliveries(
        self,
        webhook_id: FromPath[str],
        caller: CallerDep,
        services: ServicesDep,
        limit: Annotated[int, QueryParameter(ge=1, le=1000)] = 100,
    ) -> answers.Deliveries:
        """The delivery log, newest first: each event's attempts, last status or error, and outcome."""
        caller.require_operator("read delivery logs")
        return [to_wire(d) for d in services.engine.outbox.list_deliveries(caller.org_id, webhook_id, limit)]


def _describe(hook: Webhook) -> dict[str, Any]:
    shown: dict[str, Any] = to_wire(hook)
    del shown["secret"]
    return shown

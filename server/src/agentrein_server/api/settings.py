"""The organisation's settings: what drift leads to (``onDrift``), its own intent verifier (the
environment's ``AGENTREIN_VERIFIER_*`` otherwise), and the hosts webhooks may be sent to."""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Controller, get, patch
from litestar.params import JSONBody

from agentrein_core.errors import ForbiddenError
from agentrein_core.model import OrganisationSettings
from agentrein_server.api import answers, bodies
from agentrein_server.problems import documented
from agentrein_server.services import CallerDep, ServicesDep


class SettingsController(Controller):
    path = "/settings"
    tags = ("settings",)

    @get(
        sync_to_thread=True,
        operation_id="getSettings",
        summary="Show the settings",
        responses=documented(ForbiddenError),
    )
    def show(self, caller: CallerDep, services: ServicesDep) -> answers.Settings:
        caller.require_operator("read the organisation's settings")
        return _describe(services.engine.accounts.settings(caller.org_id))

    @patch(
        sync_to_thread=True,
        operation_id="changeSettings",
        summary="Change the settings",
        responses=documented(ForbiddenError, body=True),
    )
    def change(
        self, data: JSONBody[bodies.SettingsChange], caller: CallerDep, services: ServicesDep
    ) -> answers.Settings:
        """Change the fields given. ``verifierApiKey`` is write-only: stored encrypted, never returned."""
        caller.require_operator("change the organisation's settings")
        changes = {k: v for k, v in msgspec.structs.asdict(data).items() if v is not msgspec.UNSET}
        return _describe(services.configuration.update_settings(caller.org_id, **changes))


def _describe(settings: OrganisationSettings) -> dict[str, Any]:
    return {
        "onDrift": settings.on_drift,
        "verifierUrl": settings.verifier_url,
        "verifierModel": settings.verifier_model,
        "hasVerifierApiKey": settings.verifier_api_key is not None,
        "webhookHosts": settings.webhook_hosts,
    }

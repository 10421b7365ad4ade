"""What every request handler works with, made once per server process, and the few steps that pair an
engine use case with the server's own follow-up (encrypting, forgetting a cached key), so that the REST API
and the dashboard take them the same way."""

from __future__ import annotations

import secrets
from typing import TypeAlias

from attrs import define
from litestar.datastructures import State
from litestar.di import NamedDependency

from agentrein_core.connector import check_settings
from agentrein_core.engine import Engine
from agentrein_core.errors import ValidationError
from agentrein_core.model import JSON, ApiKey, Approval, ConnectorConfig, OrganisationSettings, Webhook
from agentrein_core.plugins import Connectors
from agentrein_core.settings_undo import SettingsUndoExecutor
from agentrein_core.statuses import WebhookFormat
from agentrein_core.vault import Vault
from agentrein_server.auth import Authenticator, Caller
from agentrein_server.workers import Workers

WEBHOOK_SECRET_PREFIX = "whsec_"


@define
class Services:
    engine: Engine
    connectors: Connectors
    vault: Vault
    workers: Workers
    authenticator: Authenticator
    #: How the server runs undos (the workers' executor): what can stop them is shown before a rollback.
    undo: SettingsUndoExecutor

    def decide(self, org_id: str, approval_id: str, reviewer: str, reason: str | None, *, approve: bool) -> Approval:
        """Approve or reject (a decision may start or resume a rollback: its commit wakes the workers)."""
        decide = self.engine.approve if approve else self.engine.reject
        return decide(org_id, approval_id, reviewer, reason)

    def configure_connector(
        self, org_id: str, name: str, *, enabled: bool, config: JSON, credentials: JSON | None
    ) -> ConnectorConfig:
        """Check the settings (the connector's own check, and the targets it declares: ``check_settings``),
        encrypt the credentials (``None`` keeps the stored ones) and store them. Settings being disabled are
        not checked: a connector can always be switched off."""
        connector = self.connectors.get(name)
        if enabled:
            if credentials is None:
                stored = self.engine.connector_config(org_id, name)
                kept = self.vault.decrypt(stored.credentials) if stored is not None else {}
                check_settings(connector, config, kept)
            else:
                check_settings(connector, config, credentials)
        token = self.vault.encrypt(credentials) if credentials is not None else None
        return self.engine.configure_connector(org_id, name, enabled=enabled, config=config, credentials=token)

    def update_settings(self, org_id: str, **changes: object) -> OrganisationSettings:
        """Change the organisation's settings; a verifier API key given is checked and stored encrypted."""
        key = changes.get("verifier_api_key")
        if key is not None:
            if not isinstance(key, str) or not key or not key.isascii() or not key.isprintable():
                raise ValidationError("verifierApiKey", "must be printable ASCII, as API keys are")
            changes["verifier_api_key"] = self.vault.encrypt_text(key)
        return self.engine.update_settings(org_id, **changes)

    def add_webhook(
        self, org_id: str, url: str, events: list[str], secret: str | None, fmt: WebhookFormat | str
    ) -> tuple[Webhook, str]:
        """Register a webhook; its signing secret (made when none is given) is returned this once only."""
        secret = secret or WEBHOOK_SECRET_PREFIX + secrets.token_urlsafe(32)
        return self.engine.add_webhook(org_id, url, events, self.vault.encrypt_text(secret), fmt), secret

    def revoke_api_key(self, org_id: str, key_id: str) -> ApiKey:
        """The key stops working: at once on this server, within seconds on the others."""
        revoked = self.engine.revoke_api_key(org_id, key_id)
        self.authenticator.forget(key_id)
        return revoked


def provide_services(state: State) -> Services:
    services: Services = state.services
    return services


#: Handler parameters: the server's services, and who is calling (resolved from the API key).
ServicesDep: TypeAlias = NamedDependency[Services]
CallerDep: TypeAlias = NamedDependency[Caller]

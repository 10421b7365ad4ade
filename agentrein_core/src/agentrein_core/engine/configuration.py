"""The organisation's settings that hold secrets: a connector's settings and credentials, the verifier's API
key, a webhook's signing secret. They are checked and encrypted here, before the engine stores them, so the
REST API, the dashboard and the command line (on a database) store them by the same rules."""

from __future__ import annotations

import os
import secrets
from typing import Any

from attrs import frozen

from agentrein_core.connector import check_settings
from agentrein_core.engine.facade import Engine
from agentrein_core.errors import ValidationError
from agentrein_core.model import JSON, ConnectorConfig, OrganisationSettings, Webhook
from agentrein_core.plugins import Connectors
from agentrein_core.statuses import WebhookFormat
from agentrein_core.vault import SECRET_KEY_ENV, Vault, secret_key_file

WEBHOOK_SECRET_PREFIX = "whsec_"


@frozen
class Configuration:
    """Given the engine, the installed connectors (whose checks the settings pass) and the vault."""

    engine: Engine
    connectors: Connectors
    vault: Vault

    def configure_connector(
        self, org_id: str, name: str, *, enabled: bool, config: JSON, credentials: JSON | None
    ) -> ConnectorConfig:
        """Check the settings (the connector's own check, and the targets it declares: ``check_settings``),
        encrypt the credentials (``None`` keeps the stored ones) and store them. Settings being disabled are
        not checked: a connector can always be switched off."""
        connector = self.connectors.get(name)
        if enabled:
            if credentials is None:
                stored = self.engine.accounts.connector_config(org_id, name)
                kept = self.vault.decrypt(stored.credentials) if stored is not None else {}
                check_settings(connector, config, kept, org_id)
            else:
                check_settings(connector, config, credentials, org_id)
        token = self.vault.encrypt(credentials) if credentials is not None else None
        return self.engine.accounts.configure_connector(org_id, name, enabled=enabled, config=config, credentials=token)

    def connectors_of(self, org_id: str) -> list[dict[str, Any]]:
        """Every installed connector, with the organisation's settings for it, as :func:`shown`."""
        stored = {c.connector: c for c in self.engine.accounts.list_connector_configs(org_id)}
        return [shown(name, stored.get(name)) for name in self.connectors.names()]

    def update_settings(self, org_id: str, **changes: object) -> OrganisationSettings:
        """Change the organisation's settings; a verifier API key given is checked and stored encrypted."""
        key = changes.get("verifier_api_key")
        if key is not None:
            if not isinstance(key, str) or not key or not key.isascii() or not key.isprintable():
                raise ValidationError("verifierApiKey", "must be printable ASCII, as API keys are")
            changes["verifier_api_key"] = self.vault.encrypt_text(key)
        return self.engine.accounts.update_settings(org_id, **changes)

    def add_webhook(
        self, org_id: str, url: str, events: list[str], secret: str | None, fmt: WebhookFormat | str
    ) -> tuple[Webhook, str]:
        """Register a webhook; its signing secret (made when none is given) is returned this once only."""
        secret = secret or WEBHOOK_SECRET_PREFIX + secrets.token_urlsafe(32)
        return self.engine.outbox.add_webhook(org_id, url, events, self.vault.encrypt_text(secret), fmt), secret


def shown(name: str, stored: ConnectorConfig | None) -> dict[str, Any]:
    """A connector's settings as shown, the credentials only as whether there are some (``GET /connectors``
    answers so, and ``agentrein connectors`` on a database shows them the same way)."""
    return {
        "name": name,
        "enabled": bool(stored and stored.enabled),
        "config": stored.config if stored else {},
        "hasCredentials": bool(stored and stored.credentials),
        "updatedAt": stored.updated_at.isoformat() if stored else None,
    }


def vault_of(database_url: str, dialect: str) -> Vault:
    """The vault of the database at ``database_url``: ``$AGENTREIN_SECRET_KEY``, else (SQLite only) a key file
    beside the database."""
    if dialect == "postgresql" and not os.environ.get(SECRET_KEY_ENV):
        raise ValidationError(
            SECRET_KEY_ENV,
            "must be set with PostgreSQL, the same for every replica and command (a key file of one machine "
            "would not decrypt what another stored); make one with: python -c "
            "'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())'",
        )
    return Vault.from_environment(secret_key_file(database_url))

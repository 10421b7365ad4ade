"""The Connectors page's form for one connector, built from the settings it declares
(:attr:`~agentrein_core.connector.Connector.settings`): what is typed becomes the same ``config`` and
``credentials`` JSON as ``PUT /connectors/{name}`` takes, which the connector's ``check_config`` then judges.

Lists are typed one item per line, headers one ``Name: value`` per line, a JSON setting as a JSON object.
Secrets are write-only: the form never shows them, an empty one keeps the stored value, and an optional one can
be forgotten. A connector that declares nothing (a plugin written before the declaration) is asked for raw JSON
instead."""

from __future__ import annotations

from collections.abc import Mapping

from attrs import frozen

from agentrein_core.connector import Connector, Setting, SettingKind
from agentrein_core.converter import json_object
from agentrein_core.errors import ValidationError
from agentrein_core.model import JSON, ConnectorConfig
from agentrein_server.dashboard.rendering import pretty

#: What a URL-encoded form posts: one value per name, several for a name sent more than once.
Posted = Mapping[str, str | list[str]]

#: The form of a connector that declares no settings: its config and credentials as JSON.
RAW_JSON = (
    Setting("config", "Settings (JSON)", "The connector's settings, as PUT /connectors/{name} takes them."),
    Setting("credentials", "Credentials (JSON)", "Stored encrypted, never shown again.", secret=True),
)
FORGET = "forget."


@frozen
class FormField:
    """One field as the form shows it: its value (stored or typed, never a secret's), whether a secret is
    stored under it, and the reason it was refused, if it was."""

    setting: Setting
    name: str
    value: str
    stored: bool = False
    error: str = ""


def form_fields(
    connector: Connector,
    stored: ConnectorConfig | None,
    stored_secrets: frozenset[str],
    typed: Posted | None = None,
    refused: ValidationError | None = None,
) -> list[FormField]:
    """The fields of ``connector``'s form: filled from what was ``typed`` when a submit was ``refused``, else
    from the stored settings."""
    declared = bool(connector.settings)
    config = stored.config if stored else {}
    fields = []
    for setting in connector.settings or RAW_JSON:
        name = _name(connector, setting)
        if setting.secret:
            value = ""
        elif typed is not None:
            value = _text(typed, name)
        else:
            value = shown(config.get(setting.key), setting.kind) if declared else pretty(config)
        kept = setting.secret and (setting.key in stored_secrets if declared else bool(stored_secrets))
        error = str(refused).removeprefix(f"{refused.field}: ") if refused and _names(refused.field, name) else ""
        fields.append(FormField(setting, name, value, kept, error))
    return fields


def settings_from_form(connector: Connector, form: Posted, kept: JSON) -> tuple[JSON, JSON | None]:
    """``(config, credentials)`` as ``PUT /connectors/{name}`` takes them; credentials ``None`` (keep the
    stored ones) when no secret was typed or forgotten. ``kept``: the stored credentials, decrypted."""
    if not connector.settings:
        credentials = json_object("credentials", _text(form, "credentials"))
        return json_object("config", _text(form, "config")) or {}, credentials
    config: dict[str, object] = {}
    secrets: dict[str, object] = {}
    changed = False
    for setting in connector.settings:
        value = parsed(setting, _text(form, setting.field))
        if not setting.secret:
            if value is not None:
                config[setting.key] = value
        elif value is not None:
            secrets[setting.key], changed = value, True
        elif _text(form, FORGET + setting.key):
            changed = True
        elif setting.key in kept:
            secrets[setting.key] = kept[setting.key]
    return config, (secrets if changed else None)


def parsed(setting: Setting, text: str) -> object | None:
    """A setting's JSON value from what was typed; ``None`` when nothing was."""
    if setting.kind is SettingKind.JSON:
        return json_object(setting.field, text)
    if setting.kind in (SettingKind.LIST, SettingKind.HOSTS, SettingKind.HEADERS):
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        if not lines:
            return None
        if setting.kind is not SettingKind.HEADERS:
            return lines
        headers = {}
        for number, line in enumerate(lines, 1):
            name, colon, value = line.partition(":")
            if not colon or not name.strip():
                raise ValidationError(setting.field, f"line {number} is not Name: value")
            headers[name.strip()] = value.strip()
        return headers
    return text.strip() or None


def shown(value: object, kind: SettingKind) -> str:
    """A stored value as the form shows it (lists one item per line)."""
    if value is None:
        return ""
    if kind in (SettingKind.LIST, SettingKind.HOSTS) and isinstance(value, list):
        return "\n".join(map(str, value))
    if kind is SettingKind.HEADERS and isinstance(value, dict):
        return "\n".join(f"{k}: {v}" for k, v in value.items())
    return value if isinstance(value, str) else pretty(value)


def _name(connector: Connector, setting: Setting) -> str:
    """The form field of a setting: as errors name it (``config.allowedHosts``), or ``config`` for raw JSON."""
    return setting.field if connector.settings else setting.key


def _names(field: str, name: str) -> bool:
    """Whether an error's field (``config.allowedHosts``, ``config.allowedHosts[1]``) is the form field's."""
    return field == name or field.startswith((name + ".", name + "["))


def _text(form: Posted, name: str) -> str:
    value = form.get(name, "")
    if isinstance(value, list):
        raise ValidationError(name, "was sent more than once")
    return value

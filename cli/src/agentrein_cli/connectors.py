"""Connector plugins, and which of them rollbacks may run inverses through."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentrein_cli.common import AsJson, Listing, Target, console, errors_exit, print_json, targeted
from agentrein_cli.reach import admin, configuration

if TYPE_CHECKING:
    from agentrein_core.model import JSON

connectors = typer.Typer(help="Connector plugins, and which may run inverses for rollbacks.", no_args_is_help=True)

JsonObject = Annotated[str | None, typer.Option(help="A JSON object (omitted: keep what is stored).")]


@connectors.command("list")
@targeted
def connectors_list(target: Target, as_json: AsJson = False) -> None:
    """The installed connector plugins, and whether each is enabled for the organisation: rollbacks run in
    a server (or by `agentrein rollback` on a database) undo only through enabled ones."""
    if target.url:
        with admin(target.url, target.api_key) as operator:
            rows = operator.list_connectors()
    else:
        with configuration(target) as (configured, org_id):
            rows = configured.connectors_of(org_id)
    if as_json:
        print_json(rows)  # as GET /connectors answers
        return
    shown = Listing("connector", "enabled", "credentials", "config")
    for row in rows:
        credentials = "stored" if row["hasCredentials"] else "—"
        shown.add_row(row["name"], "yes" if row["enabled"] else "no", credentials, json.dumps(row["config"]))
    console.print(shown)


@connectors.command("enable")
@targeted
def connectors_enable(target: Target, name: str, config: JsonObject = None, credentials: JsonObject = None) -> None:
    """Enable a connector for the organisation, so rollbacks can run its inverses; --config and --credentials
    (stored encrypted) are JSON objects, e.g. --config '{"allowedHosts": ["api.example.com"]}' for http."""
    from agentrein_core.converter import json_object

    with errors_exit():
        settings = json_object("--config", config), json_object("--credentials", credentials)
    _configure(target, name, True, *settings)


@connectors.command("disable")
@targeted
def connectors_disable(target: Target, name: str) -> None:
    """Disable a connector for the organisation (its settings are kept): rollbacks no longer run its inverses."""
    _configure(target, name, False, None, None)


def _configure(target: Target, name: str, enabled: bool, config: JSON | None, credentials: JSON | None) -> None:
    """Store the connector's settings; ``None`` keeps the stored config or credentials."""
    row: dict[str, Any]
    if target.url:
        with admin(target.url, target.api_key) as operator:
            row = operator.configure_connector(name, enabled=enabled, config=config, credentials=credentials)
    else:
        from agentrein_core.engine.configuration import shown

        with configuration(target) as (configured, org_id):
            if config is None:
                stored = configured.engine.accounts.connector_config(org_id, name)
                config = stored.config if stored is not None else {}
            stored = configured.configure_connector(
                org_id, name, enabled=enabled, config=config, credentials=credentials
            )
            row = shown(name, stored)
    state = "enabled" if row["enabled"] else "disabled"
    stored_credentials = "stored" if row["hasCredentials"] else "none"
    console.print(f"Connector {name} {state}; config {json.dumps(row['config'])}; credentials {stored_credentials}")

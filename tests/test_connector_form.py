"""The Connectors page's form, from what a connector declares (or raw JSON for one that declares nothing),
converted to the ``config`` and ``credentials`` JSON that ``PUT /connectors/{name}`` takes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar

import pytest

from agentrein_core.connector import Connector, Setting, SettingKind
from agentrein_core.errors import ValidationError
from agentrein_core.model import JSON, ConnectorConfig
from agentrein_mcp import McpConnector
from agentrein_server.dashboard.connector_form import form_fields, settings_from_form


class Undeclared(Connector):
    """A plugin written before connectors declared their settings: it has server-side undo, and no form."""

    name: ClassVar[str] = "legacy"

    def prepare(self, client: Any, path: tuple[str, ...], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        return None

    def server_client(self, config: JSON, credentials: JSON, org_id: str) -> object:
        return object()


class Declared(Undeclared):
    name: ClassVar[str] = "declared"
    settings: ClassVar[tuple[Setting, ...]] = (
        Setting("hosts", "Hosts", "Where undos go.", SettingKind.LIST),
        Setting("headers", "Headers", "Sent with every undo.", SettingKind.HEADERS, secret=True),
        Setting("token", "Token", "The API token.", secret=True, required=True),
    )


def test_a_connector_that_declares_nothing_is_asked_for_raw_json() -> None:
    fields = form_fields(Undeclared(), None, frozenset())
    assert [(f.name, f.setting.secret) for f in fields] == [("config", False), ("credentials", True)]
    config, credentials = settings_from_form(Undeclared(), {"config": '{"region": "eu"}', "credentials": ""}, {})
    assert (config, credentials) == ({"region": "eu"}, None)  # empty credentials keep the stored ones
    with pytest.raises(ValidationError, match="config: is nested too deeply"):
        settings_from_form(Undeclared(), {"config": "[" * 100_000}, {})


def test_typed_lines_become_lists_and_headers_and_an_empty_secret_keeps_the_stored_one() -> None:
    form = {"config.hosts": " a.example.com \n\n b.example.com", "credentials.headers": "X-Key: k:1\nX-Team: ops"}
    config, credentials = settings_from_form(Declared(), form, {"token": "t0"})
    assert config == {"hosts": ["a.example.com", "b.example.com"]}
    assert credentials == {"headers": {"X-Key": "k:1", "X-Team": "ops"}, "token": "t0"}
    assert settings_from_form(Declared(), {"config.hosts": "a.example.com"}, {"token": "t0"})[1] is None
    forgotten = settings_from_form(Declared(), {"forget.headers": "on"}, {"headers": {"A": "b"}, "token": "t0"})
    assert forgotten == ({}, {"token": "t0"})


def test_a_header_line_without_a_colon_is_refused_naming_the_setting() -> None:
    with pytest.raises(ValidationError, match=r"credentials\.headers: line 2 is not Name: value"):
        settings_from_form(Declared(), {"credentials.headers": "X-Key: k\nBearer abc"}, {})


def test_a_name_sent_twice_is_refused_rather_than_guessed() -> None:
    with pytest.raises(ValidationError, match=r"config\.hosts: was sent more than once"):
        settings_from_form(Declared(), {"config.hosts": ["a", "b"]}, {})


def test_a_refused_form_keeps_what_was_typed_but_never_a_secret_and_marks_the_field_at_fault() -> None:
    typed = {"config.hosts": "a.example.com", "credentials.token": "s3cret"}
    refusal = ValidationError("credentials.token", "is not a token")
    fields = {f.name: f for f in form_fields(Declared(), None, frozenset({"token"}), typed, refusal)}
    assert fields["config.hosts"].value == "a.example.com"
    assert fields["credentials.token"].value == "" and fields["credentials.token"].stored
    assert fields["credentials.token"].error == "is not a token" and fields["config.hosts"].error == ""


def test_the_mcp_connectors_servers_are_typed_as_json_and_shown_back_as_json() -> None:
    servers = '{"tracker": {"url": "https://mcp.example.com/mcp"}}'
    form = {"config.servers": servers, "credentials.headers": '{"tracker": {"Authorization": "Bearer t"}}'}
    config, credentials = settings_from_form(McpConnector(), form, {})
    assert config == {"servers": {"tracker": {"url": "https://mcp.example.com/mcp"}}}
    assert credentials == {"headers": {"tracker": {"Authorization": "Bearer t"}}}
    stored = ConnectorConfig("org", "mcp", True, config, datetime.now(UTC), "encrypted")
    fields = {f.name: f for f in form_fields(McpConnector(), stored, frozenset({"headers"}))}
    assert '"url": "https://mcp.example.com/mcp"' in fields["config.servers"].value
    assert fields["credentials.headers"].value == "" and fields["credentials.headers"].stored
    with pytest.raises(ValidationError, match=r"config\.servers: is not valid JSON"):
        settings_from_form(McpConnector(), {"config.servers": "tracker = https://mcp.example.com"}, {})

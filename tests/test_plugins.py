"""Connectors are plugins, found through the `agentrein` entry-point group, the built-in ones included."""

from __future__ import annotations

from importlib.metadata import entry_points

import pytest

from agentrein_core.errors import UnknownConnectorError, ValidationError
from agentrein_core.hookspecs import hookimpl
from agentrein_core.plugins import Connectors, installed_connectors, new_plugin_manager
from agentrein_http import HttpConnector


def test_the_http_connector_is_registered_through_an_entry_point() -> None:
    (entry,) = [ep for ep in entry_points(group="agentrein") if ep.name == "http"]
    assert entry.value == "agentrein_http"
    pm = new_plugin_manager()
    assert pm.has_plugin("http")
    assert "http" in installed_connectors().names()


def test_an_unknown_connector_lists_the_installed_ones() -> None:
    with pytest.raises(UnknownConnectorError) as raised:
        installed_connectors().get("stripe-ish")
    assert "http" in raised.value.installed
    assert "installed: " in str(raised.value)


def test_two_plugins_providing_one_name_is_an_error() -> None:
    class Duplicate:
        @hookimpl
        def agentrein_register_connectors(self) -> list[HttpConnector]:
            return [HttpConnector()]

    pm = new_plugin_manager()
    pm.register(Duplicate())
    with pytest.raises(ValidationError, match="two plugins provide a connector named 'http'"):
        Connectors(pm)

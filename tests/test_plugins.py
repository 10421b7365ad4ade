"""Connectors are plugins, found through the `agentrein` entry-point group, the built-in ones included."""

from __future__ import annotations

from collections.abc import Generator
from datetime import UTC, datetime
from importlib.metadata import entry_points

import pytest

from agentrein_core.connector import Connector, hookimpl
from agentrein_core.errors import UnknownConnectorError, ValidationError
from agentrein_core.model import Event
from agentrein_core.plugins import Connectors, installed_connectors, new_plugin_manager
from agentrein_core.statuses import EventType
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


class Watcher:
    """A hook wrapper, as a tracing or filtering plugin would register one."""

    def __init__(self) -> None:
        self.seen: list[list[str]] = []

    @hookimpl(wrapper=True)
    def agentrein_register_connectors(self) -> Generator[None, list[list[Connector]], list[list[Connector]]]:
        provided = yield
        self.seen.append(sorted(c.name for connectors in provided for c in connectors))
        return provided


def test_a_hook_wrapper_around_agentrein_register_connectors_sees_the_call() -> None:
    watcher = Watcher()
    pm = new_plugin_manager()
    pm.register(watcher, "watcher")
    connectors = Connectors(pm)
    assert watcher.seen == [connectors.names()]
    assert "http" in watcher.seen[0]


class Listener:
    def __init__(self, fails: bool) -> None:
        self.fails = fails
        self.heard: list[str] = []

    @hookimpl
    def agentrein_notify(self, event: Event) -> None:
        self.heard.append(event.event_id)
        if self.fails:
            raise RuntimeError("this listener is broken")


class NotifyWatcher:
    def __init__(self) -> None:
        self.calls = 0

    @hookimpl(hookwrapper=True)
    def agentrein_notify(self, event: Event) -> Generator[None, None, None]:
        self.calls += 1
        yield


def test_every_notify_plugin_hears_an_event_through_the_plugin_manager_even_when_another_fails() -> None:
    broken, working, watcher = Listener(fails=True), Listener(fails=False), NotifyWatcher()
    pm = new_plugin_manager(load_entry_points=False)
    for name, plugin in (("broken", broken), ("working", working), ("watcher", watcher)):
        pm.register(plugin, name)
    event = Event(
        event_id="evt_1", org_id="org_1", type=EventType.APPROVAL_REQUESTED, data={}, created_at=datetime.now(UTC)
    )
    Connectors(pm).notify(event)
    assert broken.heard == ["evt_1"] and working.heard == ["evt_1"]
    assert watcher.calls == 2

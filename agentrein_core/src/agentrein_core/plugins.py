"""The plugin manager and the connectors it found (and, through it, the verifier and notify hooks).

Plugins are found through the ``agentrein`` entry-point group with pluggy's ``load_setuptools_entrypoints``,
so an installed distribution is all it takes to add a connector.
"""

from __future__ import annotations

import logging
from functools import cache
from typing import TYPE_CHECKING, cast

import pluggy

from agentrein_core import hookspecs
from agentrein_core.connector import Connector
from agentrein_core.errors import UnknownConnectorError, ValidationError

if TYPE_CHECKING:
    from agentrein_core.model import Event

ENTRY_POINT_GROUP = "agentrein"

log = logging.getLogger("agentrein")


def new_plugin_manager(load_entry_points: bool = True) -> pluggy.PluginManager:
    pm = pluggy.PluginManager("agentrein")
    pm.add_hookspecs(hookspecs)
    if load_entry_points:
        pm.load_setuptools_entrypoints(ENTRY_POINT_GROUP)
    return pm


class Connectors:
    """The connectors every registered plugin provides, by name."""

    def __init__(self, pm: pluggy.PluginManager) -> None:
        #: The plugin manager that found them: its other hooks (verifiers, notifiers) are called through it.
        self.pm = pm
        self._by_name: dict[str, Connector] = {}
        # Called through pm.hook, so hook wrappers and pluggy's tracing see it; pluggy answers the last
        # registered plugin first, so the lists are reversed to keep the plugins' own order.
        provided = list(reversed(cast(list[list[Connector]], pm.hook.agentrein_register_connectors())))
        providers = _providers(pm.hook.agentrein_register_connectors, len(provided))
        provider: dict[str, str] = {}
        for plugin_name, connectors in zip(providers, provided, strict=True):
            for connector in connectors:
                if connector.name in self._by_name:
                    raise ValidationError(
                        "connector",
                        f"two plugins provide a connector named {connector.name!r}: "
                        f"{provider[connector.name]!r} and {plugin_name!r}",
                    )
                self._by_name[connector.name] = connector
                provider[connector.name] = plugin_name

    def notify(self, event: Event) -> None:
        """Hands ``event`` to every ``agentrein_notify`` plugin, each on its own (one that fails does not keep
        the event from the others), each through the plugin manager so hook wrappers and tracing see it."""
        caller = self.pm.hook.agentrein_notify
        listeners = [impl for impl in caller.get_hookimpls() if not _wraps(impl)]
        for listener in listeners:
            others = [impl.plugin for impl in listeners if impl is not listener]
            try:
                self.pm.subset_hook_caller("agentrein_notify", others)(event=event)
            except Exception:
                log.exception("notify plugin %s failed on event %s", listener.plugin_name, event.event_id)

    def names(self) -> list[str]:
        return sorted(self._by_name)

    def sensitive_fields(self, name: str) -> frozenset[str]:
        """The connector's own fields to redact; none for a connector that is not installed here."""
        found = self.find(name)
        return found.sensitive_fields if found is not None else frozenset()

    def every_sensitive_field(self) -> frozenset[str]:
        """The fields every installed connector redacts: for text of no one connector (intents, log lines)."""
        return frozenset().union(*(c.sensitive_fields for c in self._by_name.values()))

    def find(self, name: str) -> Connector | None:
        """The connector named ``name``, or ``None`` where it is not installed."""
        return self._by_name.get(name)

    def get(self, name: str) -> Connector:
        try:
            return self._by_name[name]
        except KeyError:
            raise UnknownConnectorError(name, self.names()) from None


def _wraps(impl: pluggy.HookImpl) -> bool:
    return impl.hookwrapper or impl.wrapper


def _providers(caller: pluggy.HookCaller, answers: int) -> list[str]:
    """The plugin behind each answer, in registration order, for an error's message. A wrapper that changed
    the answers, or a plugin that answered ``None`` (pluggy leaves it out), leaves them unknown."""
    names = [impl.plugin_name for impl in caller.get_hookimpls() if not _wraps(impl)]
    return names if len(names) == answers else ["a plugin"] * answers


@cache
def installed_connectors() -> Connectors:
    """The connectors of the installed plugins, found once per process."""
    return Connectors(new_plugin_manager())

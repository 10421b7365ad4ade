"""The plugin manager and the connectors it found (and, through it, the verifier and notify hooks).

Plugins are found through the ``agentrein`` entry-point group with pluggy's ``load_setuptools_entrypoints``,
so an installed distribution is all it takes to add a connector.
"""

from __future__ import annotations

from functools import cache
from typing import cast

import pluggy

from agentrein_core import hookspecs
from agentrein_core.connector import Connector
from agentrein_core.errors import UnknownConnectorError, ValidationError

ENTRY_POINT_GROUP = "agentrein"


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
        provider: dict[str, str] = {}
        for impl in pm.hook.agentrein_register_connectors.get_hookimpls():
            provided = cast(list[Connector], impl.function())
            for connector in provided:
                if connector.name in self._by_name:
                    raise ValidationError(
                        "connector",
                        f"two plugins provide a connector named {connector.name!r}: "
                        f"{provider[connector.name]!r} and {impl.plugin_name!r}",
                    )
                self._by_name[connector.name] = connector
                provider[connector.name] = impl.plugin_name

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


@cache
def installed_connectors() -> Connectors:
    """The connectors of the installed plugins, found once per process."""
    return Connectors(new_plugin_manager())

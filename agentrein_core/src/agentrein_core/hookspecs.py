"""The hooks a plugin may implement. Plugins register under the ``agentrein`` entry-point group, the
built-in connectors exactly like a third party's::

    [project.entry-points.agentrein]
    myservice = "agentrein_myservice"

and mark their implementations with :data:`hookimpl`::

    from agentrein_core.hookspecs import hookimpl

    @hookimpl
    def agentrein_register_connectors():
        return [MyServiceConnector()]
"""

from __future__ import annotations

import pluggy

from agentrein_core.connector import Connector

hookspec = pluggy.HookspecMarker("agentrein")
hookimpl = pluggy.HookimplMarker("agentrein")


@hookspec
def agentrein_register_connectors() -> list[Connector]:  # type: ignore[empty-body]
    """Return the connectors this plugin provides (see :class:`agentrein_core.connector.Connector`).

    Every plugin's list is gathered; two connectors with one name are an error naming both plugins.
    """

"""AgentRein's connector for any ``httpx`` client (``wrap(client, session, connector="http")``).

Registered through the ``agentrein`` entry-point group, exactly as a third party's connector would be.
"""

from __future__ import annotations

from agentrein_core.connector import Connector, hookimpl
from agentrein_http.connector import HttpConnector

__all__ = ["HttpConnector"]


@hookimpl
def agentrein_register_connectors() -> list[Connector]:
    return [HttpConnector()]

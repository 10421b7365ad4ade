"""AgentRein's connector for GitHub (``wrap(github.Github(..., retry=None), session, connector="github")``).

Registered through the ``agentrein`` entry-point group, exactly as a third party's connector would be.
"""

from __future__ import annotations

from agentrein_core.connector import Connector, hookimpl
from agentrein_github.connector import GitHubConnector

__all__ = ["GitHubConnector"]


@hookimpl
def agentrein_register_connectors() -> list[Connector]:
    return [GitHubConnector()]

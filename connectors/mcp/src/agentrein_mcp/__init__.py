"""AgentRein's connector for MCP servers (``ar.wrap(client, session, connector="mcp")`` on an ``mcp.Client`` or
``mcp.ClientSession``): every tool call recorded, checked and undone by the calls its server's undo table
declares (:mod:`agentrein_mcp.tables`).

Registered through the ``agentrein`` entry-point group, exactly as a third party's connector would be.
"""

from __future__ import annotations

from agentrein_core.connector import Connector, hookimpl
from agentrein_mcp.binding import IDEMPOTENCY_META
from agentrein_mcp.connector import McpConnector, McpToolError
from agentrein_mcp.tables import UndoTable, load_table

__all__ = ["IDEMPOTENCY_META", "McpConnector", "McpToolError", "UndoTable", "load_table"]


@hookimpl
def agentrein_register_connectors() -> list[Connector]:
    return [McpConnector()]

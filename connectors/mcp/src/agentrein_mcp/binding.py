"""One wrapped MCP client as the connector sees it: the client, the name its tools are recorded under, the undo
table that applies, what a tool error means, and how to reach the server again once the client is closed.

The ``mcp`` SDK is imported where a client is wrapped or used, not when the plugin loads: it takes about two
seconds to import, and every process that loads the installed connectors (the command line, the server, an
agent of any other connector) would pay for it."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any, Literal

from attrs import define, evolve, field

from agentrein_core.connector import UndoError, ValidationError
from agentrein_mcp.tables import UndoTable, built_in_for, combined, load_table

if TYPE_CHECKING:
    from mcp.types import CallToolResult, Tool

ToolErrors = Literal["rollback", "record"]
#: Where an action's idempotency key travels: MCP has no standard key, so a server that honours one reads it here.
IDEMPOTENCY_META = "dev.agentrein/idempotency-key"


@define
class McpBinding:
    client: Any  # an mcp.Client or mcp.ClientSession; None once only the way to reconnect is left
    server: str
    table: UndoTable
    on_tool_error: ToolErrors = "rollback"
    #: What ``mcp.Client`` was made with (a ``StdioServerParameters``, a URL): enough to connect again; or, for
    #: the server's own connections, a function that opens a connected client (:mod:`agentrein_mcp.servers`).
    reconnect: Any = None
    _tools: dict[str, Tool] | None = field(default=None, init=False)

    async def tool(self, name: str) -> Tool | None:
        """The tool as the server lists it (its title and annotations), listed once per client, again when a
        name is not in the listing (the server's tools changed)."""
        if self._tools is None or name not in self._tools:
            self._tools = {tool.name: tool async for tool in _listing(self.client)}
        return self._tools.get(name)

    def is_closed(self) -> bool:
        """Whether the client can no longer send: its ``async with`` has ended, or its connection has (the
        server exited, the transport ended), for an ``mcp.Client`` and an ``mcp.ClientSession`` alike."""
        import mcp

        if self.client is None:
            return True
        try:
            session = self.client.session if isinstance(self.client, mcp.Client) else self.client
        except RuntimeError:  # raised once the client's ``async with`` has ended
            return True
        # The SDK says a session's connection has ended on its dispatcher only (closed for good, set before the
        # requests in flight are answered "Connection closed"); a session of another make is taken as open.
        return getattr(getattr(session, "_dispatcher", None), "_closed", False) is True

    def reopened(self) -> McpBinding:
        """This binding, to reach its server by connecting again (the client the agent wrapped is closed)."""
        return evolve(self, client=None)

    @contextlib.asynccontextmanager
    async def connected(self) -> AsyncIterator[Any]:
        """A client to call tools through: the wrapped one while it is open, else a new connection made as the
        closed client's was, closed again on leaving (one task enters and leaves it, as anyio requires)."""
        if not self.is_closed():
            yield self.client
            return
        if self.reconnect is None:
            raise UndoError(
                f"the MCP connection to {self.server!r} that made this call is closed, and AgentRein cannot reach "
                "that server again: wrap an mcp.Client (it knows how to connect), or roll back while it is open"
            )
        if callable(self.reconnect):
            async with self.reconnect() as client:
                yield client
            return
        import mcp

        async with mcp.Client(self.reconnect) as client:
            yield client


async def call_tool(client: Any, name: str, arguments: Mapping[str, Any], key: str, **options: Any) -> CallToolResult:
    """``client.call_tool`` with the idempotency key in the request's ``_meta``."""
    meta = {**(options.pop("meta", None) or {}), IDEMPOTENCY_META: key}
    result: CallToolResult = await client.call_tool(name, dict(arguments), meta=meta, **options)
    return result


def bind(client: Any, options: Mapping[str, Any]) -> McpBinding:
    """A binding of ``client`` (an entered ``mcp.Client`` or an initialized ``mcp.ClientSession``) for the
    ``wrap()`` options ``server``, ``undo`` (a table or its file) and ``on_tool_error``."""
    import mcp

    try:
        info = client.server_info
    except RuntimeError:
        raise ValidationError("client", "wrap the MCP client once connected: inside its `async with` block") from None
    server = options.get("server") or (info.name if info is not None else None)
    if not isinstance(server, str) or not server:
        raise ValidationError("server", "name the MCP server (server=...): it did not name itself")
    on_tool_error = options.get("on_tool_error", "rollback")
    if on_tool_error not in ("rollback", "record"):
        raise ValidationError("on_tool_error", f"must be 'rollback' or 'record', not {on_tool_error!r}")
    user = load_table(options["undo"]) if options.get("undo") is not None else None
    return McpBinding(
        client=client,
        server=server,
        table=combined(built_in_for(info.name if info is not None else None), user),
        on_tool_error=on_tool_error,
        reconnect=client.server if isinstance(client, mcp.Client) and _reconnectable(client.server) else None,
    )


def _reconnectable(server: Any) -> bool:
    """Whether ``mcp.Client(server)`` connects anew: a command or a URL does; a transport object or an
    in-process server is the agent's own, used once."""
    import mcp

    return isinstance(server, mcp.StdioServerParameters | str)


async def _listing(client: Any) -> AsyncIterator[Tool]:
    import mcp
    from mcp.types import PaginatedRequestParams

    cursor: str | None = None
    while True:
        if isinstance(client, mcp.ClientSession):
            page = await client.list_tools(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
        else:
            page = await client.list_tools(cursor=cursor)
        for tool in page.tools:
            yield tool
        cursor = page.next_cursor
        if not cursor:
            return

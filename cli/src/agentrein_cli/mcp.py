"""``agentrein mcp``: MCP servers behind AgentRein. ``agentrein mcp proxy … -- COMMAND`` is the stdio server a
host launches instead of COMMAND (:mod:`agentrein_cli.mcp_proxy`, imported when it runs)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from agentrein_cli.common import Target, errors_exit, targeting
from agentrein_core.errors import ValidationError

mcp = typer.Typer(help="MCP servers behind AgentRein: a proxy any MCP host can launch.", no_args_is_help=True)

#: What ``--help`` shows a user to paste into a host's configuration (Claude Desktop, Claude Code, Cursor); its
#: lines are short enough that an 80-column help wraps none (a wrap inside a string would break the JSON).
HOST_CONFIGURATION = """\
{
  "mcpServers": {
    "memory": {
      "command": "agentrein",
      "args": [
        "mcp", "proxy", "--name", "memory",
        "--agent-id", "desktop", "--intent", "Keep my notes",
        "--requires-approval", "delete_*",
        "--", "npx", "-y", "@modelcontextprotocol/server-memory"
      ],
      "env": {
        "AGENTREIN_DATABASE_URL": "sqlite:////home/me/agentrein.db"
      }
    }
  }
}"""


class OnToolError(StrEnum):
    ROLLBACK = "rollback"
    RECORD = "record"


class FailureMode(StrEnum):
    OPEN = "open"
    CLOSED = "closed"


@mcp.command(
    "proxy",
    context_settings={"allow_interspersed_args": False},
    epilog="A host's configuration (mcpServers JSON), ready to paste:\n\n\b\n" + HOST_CONFIGURATION,
)
@targeting(server=True, in_organisation=False)
def proxy(
    target: Target,
    upstream: Annotated[
        list[str] | None,
        typer.Argument(metavar="-- COMMAND [ARGS]...", help="The MCP server to start (stdio), after --."),
    ] = None,
    name: Annotated[
        str | None, typer.Option(help="The server's name in api names (NAME.tool); default: its serverInfo.name.")
    ] = None,
    agent_id: Annotated[
        str | None, typer.Option(help="The sessions' agent id; default: the host's clientInfo.name.")
    ] = None,
    intent: Annotated[str, typer.Option(help="What the host's sessions are for (their intent).")] = "",
    undo: Annotated[
        str | None, typer.Option(metavar="FILE", help="An undo table (JSON or YAML) over the built-in one.")
    ] = None,
    upstream_url: Annotated[
        str | None, typer.Option(help="A streamable-HTTP MCP server to forward to, instead of a command.")
    ] = None,
    upstream_header: Annotated[
        list[str] | None, typer.Option(metavar="'NAME: VALUE'", help="A header for --upstream-url (repeatable).")
    ] = None,
    requires_approval: Annotated[
        list[str] | None,
        typer.Option(metavar="GLOB", help="Hold these tools for a reviewer: 'delete_*' or 'memory.delete_*'."),
    ] = None,
    retryable: Annotated[
        list[str] | None, typer.Option(metavar="GLOB", help="Retry these tools on transport errors (idempotent).")
    ] = None,
    on_tool_error: Annotated[
        OnToolError, typer.Option(help="A tool's isError result rolls the session back, or is only recorded.")
    ] = OnToolError.ROLLBACK,
    failure_mode: Annotated[
        FailureMode,
        typer.Option(
            help="AgentRein unreachable: run the calls and journal them, or refuse them (reads pass either way)."
        ),
    ] = FailureMode.OPEN,
) -> None:
    """Serve an MCP server to a host (on stdin/stdout) with every tool call guarded by AgentRein: recorded
    first, checked against the policies, held for approval where asked, undone last-first on rollback. One
    session per host connection, completed when the host disconnects (or stops the proxy: SIGTERM, SIGINT).
    Everything else (tool lists, resources, prompts, notifications, what the server asks of the host) passes
    through unchanged."""
    from agentrein_cli.mcp_proxy import ProxyOptions, header, serve

    with errors_exit():
        if bool(upstream) == bool(upstream_url):
            raise ValidationError("--upstream-url", "give the MCP server's command after --, or --upstream-url")
        try:
            headers = dict(header(text) for text in upstream_header or [])
        except ValueError as exc:
            raise ValidationError("--upstream-header", str(exc)) from None
        serve(
            ProxyOptions(
                upstream_command=upstream or [],
                upstream_url=upstream_url,
                upstream_headers=headers,
                name=name,
                agent_id=agent_id,
                intent=intent,
                undo=undo,
                database_url=target.database_url,
                url=target.url,
                api_key=target.api_key,
                requires_approval=requires_approval or [],
                retryable=retryable or [],
                on_tool_error=on_tool_error.value,
                failure_mode=failure_mode.value,
            )
        )

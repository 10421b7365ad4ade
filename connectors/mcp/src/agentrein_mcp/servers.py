"""The MCP servers an organisation lets AgentRein's server reach to run undos itself (the ``mcp`` connector's
settings, ``PUT /connectors/mcp``), after the agent that made the calls is gone.

- ``config``: ``{"servers": {NAME: {"url": URL} | {"command": COMMAND}}}``, NAME the server's name in the api
  names (``memory`` of ``memory.create_entities``). A URL is a streamable-HTTP endpoint, a target like any other
  (DESIGN §8: public addresses only unless ``$AGENTREIN_ALLOW_PRIVATE_TARGETS`` is 1, checked when stored and on
  each connection). A COMMAND is the name of a stdio command the server's *administrator* declared, never a
  command line: an organisation's operator typing a command line would run programs on a server other
  organisations share.
- ``credentials``: ``{"headers": {NAME: {HEADER: VALUE}}}``, sent to that URL server (stored encrypted).
- The administrator declares the commands in a JSON file, ``{COMMAND: {"command": [PROGRAM, ARG, ...],
  "organizations": [ORG_ID, ...]}}``, named by ``$AGENTREIN_MCP_COMMANDS`` (``agentrein serve --mcp-commands
  FILE``). Only the organisations a command lists may pick it, and an undo through it runs for them only: an
  undo's tool calls come from the organisation's agent, so a command is offered only where the administrator
  judged every tool of it safe for that organisation. A command with no list (and the earlier form,
  ``{COMMAND: [PROGRAM, ...]}``) is offered to no organisation. A command runs with the server's ``PATH`` and
  ``HOME`` only (the ``mcp`` SDK's default environment), not the server's secrets.
- An undo runs on the server its call was made on (the api name's prefix), never on another its agent names.

The undo's calls were derived by the table when the call was confirmed and are stored with it, so no table is
needed here."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from attrs import frozen

from agentrein_core.connector import JSON, Action, UndoError, ValidationError
from agentrein_mcp.binding import McpBinding
from agentrein_mcp.tables import UndoTable

#: Names the administrator's file of stdio commands an organisation's settings may pick from.
COMMANDS_ENV = "AGENTREIN_MCP_COMMANDS"
SERVERS = "config.servers"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_HEADER_VALUE = re.compile(r"[^\x00-\x1f\x7f]*")


@frozen
class DeclaredCommand:
    """A stdio command the server's administrator declared: the ``argv`` it runs, and the ids of the
    ``organizations`` that may use it (none when the file lists none)."""

    argv: list[str]
    organizations: frozenset[str]


def declared_commands() -> dict[str, DeclaredCommand]:
    """The stdio commands the server's administrator declared (``$AGENTREIN_MCP_COMMANDS``), read now: a change
    to the file holds from the next settings stored or undo run."""
    path = os.environ.get(COMMANDS_ENV)
    if not path:
        return {}
    try:
        declared = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        why = f"the server's file of MCP commands {path!r} cannot be read ({exc})"
        raise ValidationError(COMMANDS_ENV, why) from None
    commands = {name: _declared(entry) for name, entry in declared.items()} if isinstance(declared, dict) else None
    if commands is None or None in commands.values():
        shape = '{"NAME": {"command": ["program", "arg", ...], "organizations": ["org_...", ...]}}'
        raise ValidationError(COMMANDS_ENV, f"{path!r} must be a JSON object {shape}")
    return {name: command for name, command in commands.items() if command is not None}


def _declared(entry: object) -> DeclaredCommand | None:
    """One command of the administrator's file; ``None`` when malformed. The earlier form, a bare argv, lists
    no organisation: such a command is offered to none until the administrator says which may use it."""
    if isinstance(entry, list):
        entry = {"command": entry}
    if not isinstance(entry, dict) or not set(entry) <= {"command", "organizations"}:
        return None
    argv, organizations = entry.get("command"), entry.get("organizations", [])
    if not (isinstance(argv, list) and argv and all(isinstance(a, str) and a for a in argv)):
        return None
    if not (isinstance(organizations, list) and all(isinstance(o, str) and o for o in organizations)):
        return None
    return DeclaredCommand(argv, frozenset(organizations))


def commands_for(org_id: str) -> dict[str, list[str]]:
    """The declared commands organisation ``org_id`` may use, by name: their argv."""
    return {name: c.argv for name, c in declared_commands().items() if org_id in c.organizations}


def check_servers(config: JSON, credentials: JSON, org_id: str) -> None:
    """The mcp connector's settings of organisation ``org_id``, as this module's docstring says (a command among
    those declared for it); :class:`ValidationError` naming the field."""
    _only_keys("config", config, {"servers"})
    _only_keys("credentials", credentials, {"headers"})
    servers = config.get("servers", {})
    if not isinstance(servers, dict):
        raise ValidationError(SERVERS, 'must map server names to {"url": URL} or {"command": NAME}')
    commands: dict[str, list[str]] | None = None
    for name, server in servers.items():
        field = f"{SERVERS}.{name}"
        if not _NAME.fullmatch(name):
            raise ValidationError(field, "a server's name is the one its calls are recorded under, like memory")
        if not isinstance(server, dict) or len(server) != 1 or not ({"url", "command"} & server.keys()):
            raise ValidationError(field, 'must be {"url": URL} (streamable HTTP) or {"command": NAME}')
        if "command" in server:
            commands = commands_for(org_id) if commands is None else commands
            if server["command"] not in commands:
                known = ", ".join(sorted(commands)) or "none are"  # the names of its own commands only
                raise ValidationError(
                    f"{field}.command",
                    f"{server['command']!r} is not an MCP command the server's administrator declared for this "
                    f"organisation ({known}); an administrator declares commands, and the organisations that may "
                    f"use each, in the file ${COMMANDS_ENV} names",
                )
    headers = credentials.get("headers", {})
    if not isinstance(headers, dict):
        raise ValidationError("credentials.headers", "must map server names to their headers")
    for name, sent in headers.items():
        field = f"credentials.headers.{name}"
        if "url" not in servers.get(name, {}):
            raise ValidationError(field, f"{name!r} is not an MCP server reached by URL in config.servers")
        if not isinstance(sent, dict) or not all(
            isinstance(k, str) and _HEADER_NAME.fullmatch(k) and isinstance(v, str) and _HEADER_VALUE.fullmatch(v)
            for k, v in sent.items()
        ):
            raise ValidationError(field, "must map header names to single-line string values")


def urls(config: JSON) -> list[tuple[str, str]]:
    """Each URL server's address with its field: the targets the engine checks."""
    servers: Mapping[str, Any] = config.get("servers", {})
    return [(f"{SERVERS}.{name}.url", server["url"]) for name, server in servers.items() if "url" in server]


def unconfigured(config: JSON, action: Action) -> str | None:
    """Why the settings do not reach the MCP server ``action`` was made on, or ``None`` when they name it."""
    tool = action.payload.get("tool")
    made_on = action.api_name.removesuffix(f".{tool}") if isinstance(tool, str) else None  # <server>.<tool>
    named = action.undo.params.get("server") if action.undo is not None else None
    if isinstance(named, str) and (made_on or not action.api_name.startswith(f"{named}.")) and named != made_on:
        # The undo comes from the agent: it runs where the call was made, or nowhere in this server.
        return f"its undo names MCP server {named!r}, not the server its call {action.api_name} was made on"
    server = named if isinstance(named, str) else made_on
    if server in config.get("servers", {}):
        return None
    return f"MCP server {server!r} is not among the servers in the organisation's mcp connector settings"


@frozen
class McpServers:
    """What the server undoes through: the MCP servers of organisation ``org_id``, each reached anew for each
    undo."""

    config: JSON
    credentials: JSON
    org_id: str

    def binding(self, server: str) -> McpBinding:
        """A binding that connects to ``server`` as the settings say (the undo's calls are stored with it)."""
        entry = self.config.get("servers", {}).get(server)
        if entry is None:
            raise UndoError(f"MCP server {server!r} is not among the servers in the mcp connector's settings")
        if "url" in entry:
            headers = self.credentials.get("headers", {}).get(server, {})
            reconnect: Any = functools.partial(_over_http, server, entry["url"], headers)
        else:
            import mcp

            argv = commands_for(self.org_id).get(entry["command"])
            if argv is None:  # the file changed since the settings were stored
                raise UndoError(
                    f"the server's administrator no longer declares MCP command {entry['command']!r} for this "
                    "organisation"
                )
            params = mcp.StdioServerParameters(command=argv[0], args=argv[1:])
            reconnect = functools.partial(_over_stdio, server, entry["command"], params)
        return McpBinding(client=None, server=server, table=UndoTable(server, {}), reconnect=reconnect)


@contextlib.asynccontextmanager
async def _over_http(server: str, url: str, headers: dict[str, str]) -> AsyncIterator[Any]:
    """An MCP client of the streamable-HTTP server at ``url``, connected through a pinned ``httpx2`` client."""
    import httpx2
    import mcp
    from mcp.client.streamable_http import streamable_http_client

    from agentrein_mcp.pinned import pinned_async_client

    timeout = httpx2.Timeout(30, read=300)  # as the SDK's own client: a long read, for its event streams
    async with (
        _unwrapped(f"MCP server {server!r} at {url}"),
        pinned_async_client(f"{SERVERS}.{server}.url", headers=headers, timeout=timeout) as http,
        mcp.Client(streamable_http_client(url, http_client=http)) as client,
    ):
        yield client


@contextlib.asynccontextmanager
async def _over_stdio(server: str, command: str, params: Any) -> AsyncIterator[Any]:
    """An MCP client of the administrator's stdio ``command`` (``params``)."""
    import mcp

    async with _unwrapped(f"MCP server {server!r} (command {command!r})"), mcp.Client(params) as client:
        yield client


@contextlib.asynccontextmanager
async def _unwrapped(server: str) -> AsyncIterator[None]:
    """What stopped a connection to ``server``, out of the SDK's task groups that wrap it (a refused address, a
    closed connection): the rollback then says it, and a transient one is retried as the connector judges."""
    from mcp.shared.exceptions import MCPError

    try:
        yield
    except BaseExceptionGroup as group:
        leaves = _leaves(group)
        if len(leaves) != 1:
            raise
        if isinstance(leaves[0], MCPError):  # "Connection closed": say whose
            raise UndoError(f"{server}: {leaves[0]}") from leaves[0]
        raise leaves[0] from None


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    return [
        leaf
        for found in group.exceptions
        for leaf in (_leaves(found) if isinstance(found, BaseExceptionGroup) else [found])
    ]


def _only_keys(field: str, value: JSON, keys: set[str]) -> None:
    unknown = sorted(set(value) - keys)
    if unknown:
        raise ValidationError(f"{field}.{unknown[0]}", f"is not a setting of the mcp connector ({', '.join(keys)})")

"""The mcp connector: the tool calls of any MCP server, made through an ``mcp.Client`` or ``mcp.ClientSession``.

- A ``call_tool`` is one action, api name ``<server>.<tool>`` (``server=`` in ``wrap()``, else the name the server
  gives itself); every other method (``list_tools``, resources, prompts) passes through. A glob in ``wrap()``
  may name the tool alone (``delete_*``).
- Classified by the undo table's entry, then the tool's annotations (``readOnlyHint``: a read, unrecorded;
  ``destructiveHint``: a delete or an update), then the verb of its name, else OTHER. Annotations come from
  the server, which is not trusted: they classify, and a read-only hint on a tool whose name says it writes
  is not believed (a read would pass every policy unrecorded).
- A result with ``isError`` fails the call (:class:`McpToolError`; the session rolls back), unless
  ``on_tool_error="record"``. The recorded response is ``structuredContent``, else the text (parsed if JSON).
- The action's idempotency key travels in ``_meta`` (``dev.agentrein/idempotency-key``); a call is retried only
  when the tool is annotated ``idempotentHint`` or the table says ``idempotent``.
- Undo comes from the server's table (:mod:`agentrein_mcp.tables`), run through the wrapped client while it is
  open, else through a new connection made as it was (:mod:`agentrein_mcp.binding`).
- In AgentRein's server, an undo runs through the organisation's settings when they name the action's MCP server
  (a streamable-HTTP URL with its headers, or a stdio command the server's administrator declared:
  :mod:`agentrein_mcp.servers`); :meth:`McpConnector.not_reached` says when they do not, and the undo is then
  handed to the agent process that holds the client, as before there were settings.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any, ClassVar

import anyio
from attrs import define

from agentrein_core.connector import (
    JSON,
    UNDO_NONE,
    Action,
    Connector,
    OperationType,
    PreparedCall,
    Setting,
    SettingKind,
    Undoable,
    UndoConfig,
    UndoError,
    UndoOutlook,
    ValidationError,
    bind_call,
    operation_by_verb,
)
from agentrein_mcp.binding import McpBinding, bind, call_tool
from agentrein_mcp.servers import McpServers, check_servers, unconfigured, urls
from agentrein_mcp.tables import ToolCall, ToolEntry

if TYPE_CHECKING:  # the mcp SDK is imported where a client is wrapped or used (agentrein_mcp.binding says why)
    from mcp.types import CallToolResult, Tool

MCP_TOOLS = "mcp-tools"
#: Failures worth sending the same call again for (the connection dropped), when the tool may run twice; and the
#: ``mcp`` SDK's "Connection closed" (:meth:`McpConnector.is_transient`).
TRANSIENT_ERRORS = (anyio.BrokenResourceError, anyio.ClosedResourceError, ConnectionError, TimeoutError)


class McpToolError(Exception):
    """A guarded tool call answered ``isError``: the call failed, and the session was rolled back (see
    ``agentrein_rollback_failure`` on it for a rollback that failed too). ``result`` is the server's answer."""

    def __init__(self, api_name: str, result: CallToolResult) -> None:
        super().__init__(f"{api_name} answered an error: {_text(result) or 'no reason given'}")
        self.api_name = api_name
        self.result = result


@define
class ToolCallContext:
    """What ``undo_for`` needs of a call: its table entry, its arguments, and the ``before`` read's result."""

    binding: McpBinding
    tool: str
    entry: ToolEntry | None
    arguments: dict[str, Any]
    before: Any = None


class McpConnector(Connector):
    name: ClassVar[str] = "mcp"
    undo_types: ClassVar[frozenset[str]] = frozenset({MCP_TOOLS})
    wrap_options: ClassVar[frozenset[str]] = frozenset({"server", "undo", "on_tool_error"})
    settings: ClassVar[tuple[Setting, ...]] = (
        Setting(
            "servers",
            "MCP servers",
            "The MCP servers the server may reach to undo calls itself, as a JSON object: each server's name (the "
            'one its calls are recorded under) to {"url": ...}, a streamable-HTTP address, or {"command": ...}, the '
            "name of a stdio command the server's administrator declared for this organisation. The undos of a server "
            "not named here are handed to the agent process that made the calls.",
            SettingKind.JSON,
            example='{"tracker": {"url": "https://mcp.example.com/mcp"}, "memory": {"command": "memory"}}',
        ),
        Setting(
            "headers",
            "Headers",
            "Sent to the MCP servers reached by URL, as a JSON object of each server's name to its headers, such "
            "as the Authorization it needs.",
            SettingKind.JSON,
            secret=True,
            example='{"tracker": {"Authorization": "Bearer …"}}',
        ),
    )

    def accepts(self, client: Any) -> bool:
        import mcp

        return isinstance(client, mcp.Client | mcp.ClientSession)

    def bind(self, client: Any, options: Mapping[str, Any]) -> McpBinding:
        return bind(client, options)

    def glob_matches(self, glob: str, api_name: str) -> bool:
        if fnmatchcase(api_name, glob):
            return True
        # the tool alone: what follows the server's name (which may hold dots itself)
        return any(fnmatchcase(api_name[i + 1 :], glob) for i, c in enumerate(api_name) if c == ".")

    def prepare(self, client: Any, path: tuple[str, ...], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if path != ("call_tool",):
            return None
        binding: McpBinding = client
        bound = bind_call(binding.client.call_tool, args, kwargs).arguments
        name, arguments = bound.pop("name"), dict(bound.pop("arguments", None) or {})
        if not isinstance(name, str):
            raise ValidationError("name", "the tool's name must be a string")
        options = {**bound.pop("kwargs", {}), **bound}
        return self._prepared(binding, name, arguments, options)

    async def _prepared(
        self, binding: McpBinding, name: str, arguments: dict[str, Any], options: dict[str, Any]
    ) -> PreparedCall | None:
        entry = binding.table.entry(name)
        tool = await binding.tool(name)
        operation = classify(name, entry, tool)
        if operation is OperationType.READ:
            return None
        api_name = f"{binding.server}.{name}"
        context = ToolCallContext(binding, name, entry, arguments)

        async def run(idempotency_key: str) -> CallToolResult:
            if entry is not None and entry.before is not None:
                context.before = await _read_before(binding, entry.before, arguments, idempotency_key)
            result = await call_tool(binding.client, name, arguments, idempotency_key, **options)
            if result.is_error and binding.on_tool_error == "rollback":
                raise McpToolError(api_name, result)
            return result

        hints = tool.annotations if tool is not None else None
        idempotent = entry.idempotent if entry is not None and entry.idempotent is not None else None
        if idempotent is None:
            idempotent = bool(hints is not None and hints.idempotent_hint)
        payload: JSON = {"tool": name, "arguments": arguments}
        title = (tool.title or (hints.title if hints is not None else None)) if tool is not None else None
        if title:
            payload["title"] = title
        about = _about(entry, {"args": arguments})
        if about:
            payload["about"] = about
        return PreparedCall(
            api_name=api_name,
            operation_type=operation,
            payload=payload,
            run=run,
            is_async=True,
            context=context,
            retry_safe=idempotent,
        )

    def failure_in(self, call: PreparedCall, result: Any) -> str | None:
        answer: CallToolResult = result
        if not answer.is_error:  # with on_tool_error="rollback", an error was raised as McpToolError instead
            return None
        return f"{McpToolError.__name__}: {call.api_name} answered an error: {_text(answer) or 'no reason given'}"

    def record_result(self, call: PreparedCall, result: Any) -> JSON:
        answer: CallToolResult = result
        recorded: JSON = {"result": recorded_result(answer)}
        if answer.is_error:
            recorded["isError"] = True
        return recorded

    def undo_for(self, call: PreparedCall, result: Any, override: Mapping[str, Any] | None) -> UndoConfig:
        context: ToolCallContext = call.context
        entry, server = context.entry, context.binding.server
        require_approval = entry is not None and entry.require_approval
        if entry is None or entry.undo is None:
            why = "its server's undo table has no entry for it, and an MCP tool has no inverse of its own"
            return UndoConfig(UNDO_NONE, {"why": (entry.why if entry is not None else None) or why})
        if not entry.undo:
            return UndoConfig(UNDO_NONE, {"why": entry.why or "its server's undo table says it has no undo"})
        data = {"args": context.arguments, "result": recorded_result(result), "before": context.before}
        if entry.undo_if is not None and not truthy(entry.undo_if.over(data)):
            why = entry.why or f"the undo table's condition ({entry.undo_if.source}) did not hold"
            return UndoConfig(UNDO_NONE, {"why": why})
        calls: list[JSON] = []
        for declared in entry.undo:
            arguments, missing = _arguments(declared, data)
            if missing is not None:
                reason = (
                    f"the undo of {call.api_name} cannot run: {declared.tool}'s argument {missing} found nothing"
                    + (" (the read made before the call failed)" if context.before is None and entry.before else "")
                )
                return UndoConfig(MCP_TOOLS, {"server": server, "calls": [], "fails": reason}, require_approval)
            if declared.optional and _empty(arguments):
                continue  # nothing of this kind to restore
            calls.append({"tool": declared.tool, "arguments": arguments, "about": _named(arguments)})
        if not calls:
            return UndoConfig(UNDO_NONE, {"why": "nothing to undo: the call changed nothing its undo would restore"})
        return UndoConfig(MCP_TOOLS, {"server": server, "calls": calls}, require_approval)

    def check_undo(self, undo: UndoConfig) -> None:
        super().check_undo(undo)
        if undo.type != MCP_TOOLS:
            return
        calls = undo.params.get("calls")
        if not isinstance(undo.params.get("server"), str) or not isinstance(calls, list):
            raise ValidationError("undo", "an mcp-tools undo names its server and lists its calls")
        for i, call in enumerate(calls):
            if not (
                isinstance(call, dict) and isinstance(call.get("tool"), str) and isinstance(call.get("arguments"), dict)
            ):
                raise ValidationError(f"undo.calls[{i}]", 'a call is {"tool": NAME, "arguments": {...}}')
        if not calls and not isinstance(undo.params.get("fails"), str):
            raise ValidationError("undo.calls", "an mcp-tools undo makes one call or more")

    def is_transient(self, error: BaseException) -> bool:
        if isinstance(error, TRANSIENT_ERRORS):
            return True
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED

        # The connection closed under the call ("Connection closed"): an undo tried again connects anew
        # (McpBinding.connected), as the forward call of an idempotent tool is tried again.
        return isinstance(error, MCPError) and error.code == CONNECTION_CLOSED

    def rolls_back(self, call: PreparedCall, error: BaseException) -> bool:
        from mcp.shared.exceptions import MCPError  # loaded already: the call raised it
        from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        context: ToolCallContext = call.context
        # A JSON-RPC error is the server's answer, as an isError result is (DESIGN 4a); a lost connection is not.
        answered = isinstance(error, MCPError) and error.code not in (CONNECTION_CLOSED, REQUEST_TIMEOUT)
        return not (answered and context.binding.on_tool_error == "record")

    def check_config(self, config: JSON, credentials: JSON, org_id: str) -> None:
        check_servers(config, credentials, org_id)

    def targets(self, config: JSON, credentials: JSON) -> list[tuple[str, str]]:
        return urls(config)

    def not_reached(self, config: JSON, action: Action) -> str | None:
        return unconfigured(config, action)

    def server_client(self, config: JSON, credentials: JSON, org_id: str) -> McpServers:
        return McpServers(config, credentials, org_id)

    def is_closed(self, client: Any) -> bool:
        binding: McpBinding = client
        return binding.is_closed()

    def serves(self, client: Any, action: Action) -> bool:
        binding: McpBinding = client
        return action.undo is None or binding.server == action.undo.params.get("server")

    def reopen(self, client: Any) -> McpBinding:
        binding: McpBinding = client
        return binding.reopened()

    def run_undo(self, undo: UndoConfig, client: Any, idempotency_key: str) -> Any:
        if undo.type != MCP_TOOLS:
            return super().run_undo(undo, client, idempotency_key)
        return _run_undo(undo, client, idempotency_key)

    def describe(self, action: Action) -> str:
        tool = str(action.payload.get("tool") or action.api_name.rpartition(".")[2])
        what = str(action.payload.get("title") or _words(tool))
        return _sentence(what, action.payload.get("about"), _server_of(action, tool))

    def describe_undo(self, action: Action) -> str:
        undo = action.undo
        if undo is None or undo.type != MCP_TOOLS:
            if undo is not None and isinstance(undo.params.get("why"), str):
                return str(undo.params["why"])
            return "no undo was recorded for it"
        if isinstance(undo.params.get("fails"), str):
            return str(undo.params["fails"])
        server = str(undo.params.get("server", ""))
        return "; then ".join(
            _sentence(_words(str(call.get("tool", ""))), call.get("about"), server)
            for call in undo.params.get("calls", [])
            if isinstance(call, dict)
        )

    def foresee_undo(self, action: Action) -> UndoOutlook:
        return UndoOutlook(
            Undoable.UNKNOWN,
            "an MCP tool is undone by the calls its server's undo table declares, known once the call has run",
        )


def classify(name: str, entry: ToolEntry | None, tool: Tool | None) -> OperationType:
    """The table decides; else the tool's annotations; else the verb of its name; else OTHER. The server is not
    trusted, and a read passes every policy unrecorded: its read-only hint is believed only of a tool whose name
    says it reads (``read_graph``, not ``send_email``) and that the table gives no undo or before-read."""
    if entry is not None and entry.operation is not None:
        return entry.operation
    hints = tool.annotations if tool is not None else None
    by_name = operation_by_verb(name)
    if hints is not None and hints.read_only_hint:
        declared = entry is not None and (entry.undo is not None or entry.before is not None or entry.require_approval)
        if by_name is OperationType.READ and not declared:
            return OperationType.READ
        return OperationType.OTHER if by_name is OperationType.READ else by_name
    if hints is not None and hints.destructive_hint:
        return OperationType.DELETE if by_name is OperationType.DELETE else OperationType.UPDATE
    return by_name


def truthy(value: Any) -> bool:
    """JMESPath's truth (the same in both languages): false, null, and empty text, lists and objects are false;
    0 is true."""
    return not (value is None or value is False or (isinstance(value, str | list | dict) and not value))


def recorded_result(result: CallToolResult) -> Any:
    """A tool's answer as recorded and as an undo table reads it (``result``): its structured content, else its
    text, parsed when it is JSON."""
    if result.structured_content is not None:
        return result.structured_content
    text = _text(result)
    try:
        return json.loads(text)
    except ValueError:
        return text


async def _read_before(binding: McpBinding, read: ToolCall, arguments: dict[str, Any], key: str) -> Any:
    """The ``before`` read's result, or ``None`` when it could not be made (its arguments found nothing, or the
    server answered an error: the thing did not exist yet)."""
    values, missing = _arguments(read, {"args": arguments})
    if missing is not None:
        return None
    answer = await call_tool(binding.client, read.tool, values, f"{key}-before")
    return None if answer.is_error else recorded_result(answer)


async def _run_undo(undo: UndoConfig, client: McpBinding | McpServers, key: str) -> None:
    if isinstance(undo.params.get("fails"), str):
        raise UndoError(str(undo.params["fails"]))
    server = str(undo.params["server"])
    binding = client.binding(server) if isinstance(client, McpServers) else client
    if binding.server != server:  # each MCP server is a service of its own
        raise UndoError(f"the undo of a call to {server!r} cannot run through a client of {binding.server!r}")
    async with binding.connected() as client:
        for i, call in enumerate(undo.params["calls"]):
            answer = await call_tool(client, call["tool"], call["arguments"], f"{key}-{i}")
            if answer.is_error:
                raise UndoError(f"{server}.{call['tool']} answered an error: {_text(answer) or 'no reason given'}")


def _arguments(call: ToolCall, data: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
    """``call``'s arguments found in ``data``, and the first that found nothing (named with its expression)."""
    values: dict[str, Any] = {}
    for name, expression in call.arguments.items():
        value = expression.over(data)
        if value is None:
            return values, f"{name} ({expression.source})"
        values[name] = value
    return values, None


def _empty(arguments: Mapping[str, Any]) -> bool:
    lists = [v for v in arguments.values() if isinstance(v, list)]
    return bool(lists) and all(not v for v in lists)


def _about(entry: ToolEntry | None, data: Mapping[str, Any]) -> list[str]:
    if entry is not None and entry.about is not None:
        found = entry.about.over(data)
        return [str(v) for v in (found if isinstance(found, list) else [found]) if v is not None]
    return _named(data["args"])


def _named(arguments: Mapping[str, Any]) -> list[str]:
    """What a call acts on, when its table does not say: the first argument that is a name or a list of names
    (or of objects with a ``name``)."""
    for value in arguments.values():
        if isinstance(value, str):
            return [value]
        if isinstance(value, list) and value:
            names = [v if isinstance(v, str) else v.get("name") if isinstance(v, dict) else None for v in value]
            if all(isinstance(n, str) for n in names):
                return [str(n) for n in names]
    return []


def _sentence(what: str, about: Any, server: str) -> str:
    names = ", ".join(str(a) for a in about) if isinstance(about, list) else ""
    return f"{what}{f' {names}' if names else ''}{f' on {server}' if server else ''}"


def _words(tool: str) -> str:
    return tool.replace("_", " ").replace("-", " ").strip().capitalize()


def _server_of(action: Action, tool: str) -> str:
    suffix = f".{tool}"
    return action.api_name[: -len(suffix)] if action.api_name.endswith(suffix) else ""


def _text(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")

"""Undo tables: what each tool of one MCP server does and how it is undone, declared as data (DESIGN §4a).

A table is JSON (or YAML) with the same meaning in Python and TypeScript; its expressions are JMESPath,
evaluated over ``{"args": ..., "result": ..., "before": ...}``::

    {"server": "memory", "serverInfo": "memory-server", "tools": {
      "create_entities": {"undo": {"tool": "delete_entities",
                                   "arguments": {"entityNames": "result.entities[].name"}, "optional": true}},
      "delete_entities": {"before": {"tool": "open_nodes", "arguments": {"names": "args.entityNames"}},
                          "undo": [{"tool": "create_entities", "arguments": {"entities": "before.entities"}}]},
      "read_graph": {"operation": "READ"}}}

Per tool, every key optional:

- ``operation``: ``CREATE``, ``UPDATE``, ``DELETE``, ``READ`` (passes through unrecorded) or ``OTHER``; decides
  before the tool's annotations and its name do.
- ``undo``: one call or a list of calls run in order as one undo step, or ``"none"``. A call is ``tool``, its
  ``arguments`` (each value an expression) and ``optional`` (a call whose list arguments all come out empty is
  skipped: nothing to restore). An expression that finds nothing (``null``) fails the undo with the reason.
- ``before``: a read made just before the tool runs, whose result is ``before`` (``null`` when it failed).
- ``undoIf``: an expression; when it comes out false (JMESPath's falsy: false, null, empty; 0 is true) the call
  is recorded with no undo, and ``why`` says why to a reviewer (``"before != null"``: a new file had nothing
  to restore).
- ``why``: the words a reviewer reads when the call has no undo.
- ``idempotent``: running it twice does it once (retries are allowed); ``requireApproval``: its undo waits for
  a reviewer's approval during a rollback.
- ``about``: an expression over ``{args}`` naming what the call acts on, for its description ("Create entities
  ada, bob on memory"); by default the first argument that names something.

``serverInfo`` (the name an upstream gives itself) lets a built-in table find its server; a user's table
extends or overrides the built-in one entry by entry (:func:`combined`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import jmespath
import jmespath.exceptions
import jmespath.parser
import yaml
from attrs import frozen

from agentrein_core.connector import OperationType, ValidationError

NO_UNDO = "none"
_ENTRY_KEYS = frozenset({"operation", "undo", "before", "undoIf", "why", "idempotent", "requireApproval", "about"})
_CALL_KEYS = frozenset({"tool", "arguments", "optional"})


@frozen
class Expression:
    """A JMESPath expression, compiled once when its table is read."""

    source: str
    compiled: jmespath.parser.ParsedResult

    def over(self, data: Mapping[str, Any]) -> Any:
        """What the expression finds in ``data``; ``None`` (found nothing) where it does not apply to what is
        there (a function given the wrong type, say), as where a path is missing."""
        try:
            return self.compiled.search(data)
        except jmespath.exceptions.JMESPathError:
            return None


@frozen
class ToolCall:
    """A call a table declares (an undo, or a ``before`` read): the tool and how its arguments are found."""

    tool: str
    arguments: Mapping[str, Expression]
    optional: bool = False


@frozen
class ToolEntry:
    """What a table says of one tool."""

    operation: OperationType | None = None
    undo: tuple[ToolCall, ...] | None = None  # None: the table does not say; () : "none"
    before: ToolCall | None = None
    undo_if: Expression | None = None
    why: str | None = None
    idempotent: bool | None = None
    require_approval: bool = False
    about: Expression | None = None


@frozen
class UndoTable:
    server: str
    tools: Mapping[str, ToolEntry]
    server_info: str | None = None

    def entry(self, tool: str) -> ToolEntry | None:
        return self.tools.get(tool)


EMPTY = UndoTable(server="", tools={})


def load_table(source: Mapping[str, Any] | str | os.PathLike[str], field: str = "undo") -> UndoTable:
    """A table from its JSON/YAML text's parsed form, or from a ``.json``/``.yaml``/``.yml`` file;
    :class:`ValidationError` naming the part at fault otherwise."""
    if isinstance(source, str | os.PathLike):
        path = Path(source)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ValidationError(field, f"cannot read the undo table {str(path)!r}: {exc.strerror}") from None
        try:
            data = yaml.safe_load(text) if path.suffix in (".yaml", ".yml") else json.loads(text)
        except (ValueError, yaml.YAMLError) as exc:
            raise ValidationError(field, f"the undo table {str(path)!r} is not valid: {exc}") from None
    else:
        data = source
    return parse_table(data, field)


def parse_table(data: Any, field: str = "undo") -> UndoTable:
    if not isinstance(data, Mapping):
        raise ValidationError(field, "an undo table is an object with 'server' and 'tools'")
    unknown = sorted(set(data) - {"server", "serverInfo", "tools"})
    if unknown:
        raise ValidationError(f"{field}.{unknown[0]}", "unknown key (a table has server, serverInfo and tools)")
    server = data.get("server", "")
    if not isinstance(server, str):
        raise ValidationError(f"{field}.server", "must be the server's name")
    server_info = data.get("serverInfo")
    if server_info is not None and not isinstance(server_info, str):
        raise ValidationError(f"{field}.serverInfo", "must be the name the server gives itself")
    tools = data.get("tools", {})
    if not isinstance(tools, Mapping):
        raise ValidationError(f"{field}.tools", "must map tool names to what each does")
    return UndoTable(
        server=server,
        server_info=server_info,
        tools={str(name): _entry(f"{field}.tools.{name}", entry) for name, entry in tools.items()},
    )


def combined(built_in: UndoTable | None, user: UndoTable | None) -> UndoTable:
    """The user's table over the built-in one: a user's entry replaces the built-in entry of its tool."""
    if built_in is None:
        return user or EMPTY
    if user is None:
        return built_in
    return UndoTable(
        server=user.server or built_in.server,
        server_info=user.server_info or built_in.server_info,
        tools={**built_in.tools, **user.tools},
    )


def built_in_tables() -> tuple[UndoTable, ...]:
    """The tables shipped for the reference servers (``contract/mcp``, shared with the TypeScript SDK)."""
    folder = resources.files("agentrein_mcp") / "tables"
    found = sorted((item for item in folder.iterdir() if item.name.endswith(".json")), key=lambda item: item.name)
    return tuple(parse_table(json.loads(item.read_text(encoding="utf-8")), item.name) for item in found)


def built_in_for(server_info_name: str | None) -> UndoTable | None:
    if not server_info_name:
        return None
    return next((t for t in _BUILT_IN if t.server_info == server_info_name), None)


def _entry(field: str, data: Any) -> ToolEntry:
    if not isinstance(data, Mapping):
        raise ValidationError(field, 'must be an object such as {"undo": {"tool": ..., "arguments": {...}}}')
    unknown = sorted(set(data) - _ENTRY_KEYS)
    if unknown:
        raise ValidationError(f"{field}.{unknown[0]}", f"unknown key (allowed: {', '.join(sorted(_ENTRY_KEYS))})")
    operation = data.get("operation")
    if operation is not None:
        try:
            operation = OperationType(str(operation).upper())
        except ValueError:
            allowed = ", ".join(OperationType)
            raise ValidationError(f"{field}.operation", f"must be one of {allowed}") from None
    undo_data = data.get("undo")
    undo: tuple[ToolCall, ...] | None
    if undo_data is None:
        undo = None
    elif undo_data == NO_UNDO:
        undo = ()
    elif isinstance(undo_data, list):
        if not undo_data:
            raise ValidationError(f"{field}.undo", 'an empty list undoes nothing: write "none"')
        undo = tuple(_call(f"{field}.undo[{i}]", call) for i, call in enumerate(undo_data))
    else:
        undo = (_call(f"{field}.undo", undo_data),)
    for flag in ("idempotent", "requireApproval"):
        if flag in data and not isinstance(data[flag], bool):
            raise ValidationError(f"{field}.{flag}", "must be true or false")
    why = data.get("why")
    if why is not None and not isinstance(why, str):
        raise ValidationError(f"{field}.why", "must be the words a reviewer reads")
    return ToolEntry(
        operation=operation,
        undo=undo,
        before=_call(f"{field}.before", data["before"]) if "before" in data else None,
        undo_if=_expression(f"{field}.undoIf", data["undoIf"]) if "undoIf" in data else None,
        why=why,
        idempotent=data.get("idempotent"),
        require_approval=bool(data.get("requireApproval", False)),
        about=_expression(f"{field}.about", data["about"]) if "about" in data else None,
    )


def _call(field: str, data: Any) -> ToolCall:
    if not isinstance(data, Mapping) or not isinstance(data.get("tool"), str) or not data["tool"]:
        raise ValidationError(field, 'a call is {"tool": NAME, "arguments": {NAME: EXPRESSION}}')
    unknown = sorted(set(data) - _CALL_KEYS)
    if unknown:
        raise ValidationError(f"{field}.{unknown[0]}", f"unknown key (allowed: {', '.join(sorted(_CALL_KEYS))})")
    arguments = data.get("arguments", {})
    if not isinstance(arguments, Mapping):
        raise ValidationError(f"{field}.arguments", "must map argument names to JMESPath expressions")
    optional = data.get("optional", False)
    if not isinstance(optional, bool):
        raise ValidationError(f"{field}.optional", "must be true or false")
    return ToolCall(
        tool=data["tool"],
        arguments={str(k): _expression(f"{field}.arguments.{k}", v) for k, v in arguments.items()},
        optional=optional,
    )


def _expression(field: str, source: Any) -> Expression:
    if not isinstance(source, str):
        raise ValidationError(field, "must be a JMESPath expression (a string)")
    try:
        return Expression(source, jmespath.compile(source))
    except jmespath.exceptions.JMESPathError as exc:
        raise ValidationError(field, f"is not a JMESPath expression: {exc}") from None


_BUILT_IN = built_in_tables()

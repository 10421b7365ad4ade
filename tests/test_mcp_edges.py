"""The mcp connector against a small server of the tests' own (the ``mcp`` SDK's ``MCPServer``, in process), for
what the reference servers do not show: a server whose annotations lie, the idempotency key in ``_meta``, and
a closed connection that AgentRein cannot open again, and one that closes in the middle of an undo."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, ToolAnnotations

from agentrein import (
    ActionStatus,
    AsyncAgentRein,
    DisplayStatus,
    OperationType,
    PolicyBlockedError,
    RollbackFailedError,
    SessionInfo,
)
from agentrein_mcp import IDEMPOTENCY_META


def ledger() -> tuple[MCPServer, dict[str, Any]]:
    """A ledger server: entries by id, and the ``_meta`` each call carried."""
    server = MCPServer("ledger")
    state: dict[str, Any] = {"entries": {}, "meta": []}

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))  # a lie: it removes an entry
    def remove_entry(entry_id: str, ctx: Context) -> dict[str, Any]:
        state["meta"].append(dict(ctx.request_context.meta or {}))
        return {"removed": state["entries"].pop(entry_id, None)}

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))  # a lie its name does not give away
    def send_note(text: str) -> dict[str, Any]:
        state["entries"]["sent"] = text
        return {"sent": True}

    @server.tool()
    def close_entry(entry_id: str) -> dict[str, Any]:
        raise MCPError(code=INVALID_PARAMS, message=f"no open entry {entry_id}")  # a JSON-RPC error, not isError

    @server.tool(annotations=ToolAnnotations(destructiveHint=True))
    def add_entry(text: str, ctx: Context) -> dict[str, Any]:
        state["meta"].append(dict(ctx.request_context.meta or {}))
        entry_id = f"e{len(state['entries']) + 1}"
        state["entries"][entry_id] = text
        return {"id": entry_id}

    return server, state


TABLE = {
    "tools": {
        "remove_entry": {"operation": "DELETE"},
        "add_entry": {"undo": {"tool": "remove_entry", "arguments": {"entry_id": "result.id"}}},
    }
}


def embedded(tmp_path: Path) -> AsyncAgentRein:
    return AsyncAgentRein(f"sqlite:///{tmp_path / 'a.db'}", organisation=f"test-{uuid.uuid4().hex[:8]}")


def test_a_tool_its_server_calls_read_only_is_recorded_when_its_name_or_the_table_says_it_writes(
    tmp_path: Path,
) -> None:
    server, state = ledger()
    told = {"tools": {"add_entry": {"operation": "READ"}}}  # the user's table decides, even against the hints

    async def scenario() -> list[Any]:
        async with embedded(tmp_path) as ar:
            s = await ar.new_session(agent_id="bookkeeper")
            async with Client(server) as raw:
                await ar.wrap(raw, s, connector="mcp").call_tool("remove_entry", {"entry_id": "e1"})
                await ar.wrap(raw, s, connector="mcp", undo=TABLE).call_tool("remove_entry", {"entry_id": "e2"})
                await ar.wrap(raw, s, connector="mcp", undo=told).call_tool("add_entry", {"text": "tea"})
            return list((await ar.get_session(s)).actions)

    by_name, by_table = asyncio.run(scenario())
    assert (by_name.api_name, by_name.operation_type) == ("ledger.remove_entry", OperationType.DELETE)
    assert by_table.operation_type is OperationType.DELETE
    assert len(state["meta"]) == 3  # every call reached the server


def test_a_read_only_hint_is_not_believed_of_a_tool_whose_name_does_not_say_it_reads(tmp_path: Path) -> None:
    server, _ = ledger()

    async def scenario() -> list[Any]:
        async with embedded(tmp_path) as ar:
            await ar.add_policy("no notes", "BLOCK", connector="mcp", api_name="ledger.send_*")
            s = await ar.new_session(agent_id="bookkeeper")
            async with Client(server) as raw:
                with pytest.raises(PolicyBlockedError):
                    await ar.wrap(raw, s, connector="mcp").call_tool("send_note", {"text": "hi"})
            return list((await ar.get_session(s)).actions)

    (action,) = asyncio.run(scenario())
    assert (action.api_name, action.operation_type) == ("ledger.send_note", OperationType.OTHER)


def test_an_expression_that_does_not_apply_to_what_is_there_finds_nothing_rather_than_raising(
    tmp_path: Path,
) -> None:
    server, _ = ledger()
    table = {"tools": {"add_entry": {"about": "join(', ', args.text)", **TABLE["tools"]["add_entry"]}}}

    async def scenario() -> list[Any]:
        async with embedded(tmp_path) as ar:
            s = await ar.new_session(agent_id="bookkeeper")
            async with Client(server) as raw:
                await ar.wrap(raw, s, connector="mcp", undo=table).call_tool("add_entry", {"text": "tea"})
            return list((await ar.get_session(s)).actions)

    (action,) = asyncio.run(scenario())
    assert action.status is ActionStatus.SUCCESS
    assert "about" not in action.payload  # join() of a string, not a list: nothing to name


def test_the_actions_idempotency_key_travels_in_the_requests_meta(tmp_path: Path) -> None:
    server, state = ledger()

    async def scenario() -> str:
        async with embedded(tmp_path) as ar:
            s = await ar.new_session(agent_id="bookkeeper")
            async with Client(server) as raw:
                await ar.wrap(raw, s, connector="mcp", undo=TABLE).call_tool("add_entry", {"text": "coffee"})
            (action,) = (await ar.get_session(s)).actions
            return action.idempotency_key

    key = asyncio.run(scenario())
    assert state["meta"][-1][IDEMPOTENCY_META] == key


def test_an_undo_through_a_connection_that_cannot_be_opened_again_says_why(tmp_path: Path) -> None:
    server, state = ledger()

    async def scenario() -> None:
        async with embedded(tmp_path) as ar:
            s = await ar.new_session(agent_id="bookkeeper")
            async with Client(server) as raw:  # an in-process server: nothing to launch again
                await ar.wrap(raw, s, connector="mcp", undo=TABLE).call_tool("add_entry", {"text": "coffee"})
            with pytest.raises(RollbackFailedError, match="cannot reach that server again"):
                await ar.rollback_session(s)
            (action,) = (await ar.get_session(s)).actions
            assert action.status is ActionStatus.ROLLBACK_FAILED

    asyncio.run(scenario())
    assert state["entries"] == {"e1": "coffee"}


def test_an_undo_runs_through_the_open_client_with_the_undos_own_key(tmp_path: Path) -> None:
    server, state = ledger()

    async def scenario() -> str:
        async with embedded(tmp_path) as ar:
            s = await ar.new_session(agent_id="bookkeeper")
            async with Client(server) as raw:
                await ar.wrap(raw, s, connector="mcp", undo=TABLE).call_tool("add_entry", {"text": "coffee"})
                await ar.rollback_session(s)
            (action,) = (await ar.get_session(s)).actions
            assert action.status is ActionStatus.ROLLED_BACK
            return action.undo_idempotency_key

    undo_key = asyncio.run(scenario())
    assert state["entries"] == {}
    assert state["meta"][-1][IDEMPOTENCY_META] == f"{undo_key}-0"


def after_a_json_rpc_error(tmp_path: Path, on_tool_error: str) -> tuple[SessionInfo, dict[str, Any]]:
    """An entry added, then a call the server answers with a JSON-RPC error (raised to the agent either way)."""
    server, state = ledger()

    async def scenario() -> SessionInfo:
        async with embedded(tmp_path) as ar:
            s = await ar.new_session(agent_id="bookkeeper")
            async with Client(server) as raw:
                ledger_client = ar.wrap(raw, s, connector="mcp", undo=TABLE, on_tool_error=on_tool_error)
                await ledger_client.call_tool("add_entry", {"text": "tea"})
                with pytest.raises(MCPError, match="no open entry e9"):
                    await ledger_client.call_tool("close_entry", {"entry_id": "e9"})
            return await ar.get_session(s)

    return asyncio.run(scenario()), state


def test_a_json_rpc_error_with_on_tool_error_record_is_recorded_failed_and_rolls_nothing_back(tmp_path: Path) -> None:
    session, state = after_a_json_rpc_error(tmp_path, "record")
    assert [(a.api_name, a.status) for a in session.actions] == [
        ("ledger.add_entry", ActionStatus.SUCCESS),
        ("ledger.close_entry", ActionStatus.FAILED),
    ]
    assert "no open entry e9" in (session.actions[1].error or "")
    assert session.display_status is DisplayStatus.ACTIVE
    assert state["entries"] == {"e1": "tea"}  # not undone


def test_a_json_rpc_error_rolls_the_session_back_by_default(tmp_path: Path) -> None:
    session, state = after_a_json_rpc_error(tmp_path, "rollback")
    assert session.display_status is DisplayStatus.REVERTED
    assert state["entries"] == {}  # the entry added before it was removed


def test_an_undo_through_a_closed_client_session_says_it_is_closed_and_cannot_be_reached_again(
    tmp_path: Path,
) -> None:
    server, state = ledger()

    async def scenario() -> None:
        async with embedded(tmp_path) as ar:
            s = await ar.new_session(agent_id="bookkeeper")
            async with Client(server) as raw:  # a ClientSession knows no command or URL to connect with again
                await ar.wrap(raw.session, s, connector="mcp", undo=TABLE).call_tool("add_entry", {"text": "tea"})
            with pytest.raises(RollbackFailedError, match="is closed, and AgentRein cannot reach that server again"):
                await ar.rollback_session(s)

    asyncio.run(scenario())
    assert state["entries"] == {"e1": "tea"}


#: A ledger over stdio that keeps its entries in a file, and whose ``remove_entry`` exits the process the first
#: time it is called (a crash in the middle of an undo); started anew, it removes the entry.
CRASHING_LEDGER = """
import json, os, sys
from pathlib import Path
from mcp.server.mcpserver import MCPServer

book = Path(sys.argv[1])
server = MCPServer("ledger")

@server.tool()
def add_entry(text: str) -> dict:
    entries = json.loads(book.read_text()) if book.exists() else {}
    entries[f"e{len(entries) + 1}"] = text
    book.write_text(json.dumps(entries))
    return {"id": f"e{len(entries)}"}

@server.tool()
def remove_entry(entry_id: str) -> dict:
    crashed = book.with_suffix(".crashed")
    if not crashed.exists():
        crashed.write_text("once")
        os._exit(1)
    entries = json.loads(book.read_text())
    removed = entries.pop(entry_id, None)
    book.write_text(json.dumps(entries))
    return {"removed": removed}

server.run()
"""


def test_a_connection_that_closes_in_the_middle_of_an_undo_is_opened_again_and_the_undo_retried(
    tmp_path: Path,
) -> None:
    script = tmp_path / "ledger.py"
    script.write_text(CRASHING_LEDGER)
    book = tmp_path / "book.json"
    params = StdioServerParameters(command=sys.executable, args=[str(script), str(book)])

    async def scenario() -> list[Any]:
        async with embedded(tmp_path) as ar:
            s = await ar.new_session(agent_id="bookkeeper")
            async with Client(params) as raw:
                await ar.wrap(raw, s, connector="mcp", undo=TABLE).call_tool("add_entry", {"text": "tea"})
                await ar.rollback_session(s)  # the server exits under the undo, the undo goes on in a new one
            return list((await ar.get_session(s)).actions)

    (action,) = asyncio.run(scenario())
    assert action.status is ActionStatus.ROLLED_BACK
    assert book.with_suffix(".crashed").exists() and json.loads(book.read_text()) == {}

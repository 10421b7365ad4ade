"""An undo a real ``agentrein serve`` hands to this process (DESIGN §4a), slower than its lease: the taker renews
the lease while the undo runs (``POST /undos/{actionId}/renew``, every third of it), so the undo is reported and
the rollback goes on. The server gives a handed undo a lease of 2 s here; the undo takes three times that."""

from __future__ import annotations

import asyncio

import pytest
from cryptography.fernet import Fernet
from mcp import Client
from mcp.server.mcpserver import MCPServer
from serving import ServerProcess

from agentrein import ActionStatus, AsyncAgentRein, SessionStatus, UndoStatus
from agentrein_core.engine.rollbacks import AGENT_UNDO_LEASE_ENV

LEASE_SECONDS = 2
UNDO_SECONDS = 3 * LEASE_SECONDS


def notes() -> tuple[MCPServer, list[str]]:
    """A notes server (in this process: the server cannot reach it, so it hands the undo over) whose undo is slow."""
    server = MCPServer("notes")
    kept: list[str] = []

    @server.tool()
    def create_note(text: str) -> dict[str, int]:
        kept.append(text)
        return {"count": len(kept)}

    @server.tool()
    async def forget_note_slowly() -> dict[str, int]:
        await asyncio.sleep(UNDO_SECONDS)
        kept.pop()
        return {"count": len(kept)}

    return server, kept


def test_an_undo_handed_to_the_agent_that_outlasts_its_lease_is_reported_and_the_session_rolled_back(
    own_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(AGENT_UNDO_LEASE_ENV, str(LEASE_SECONDS))  # read by the server process
    served = ServerProcess(own_database_url, Fernet.generate_key().decode())
    (key,) = served.printed_keys
    server, kept = notes()
    table = {"tools": {"create_note": {"operation": "CREATE", "undo": {"tool": "forget_note_slowly", "arguments": {}}}}}

    async def scenario() -> None:
        async with AsyncAgentRein(base_url=served.url, api_key=key) as ar:
            session = await ar.new_session(agent_id="notes-agent", intent="Keep notes")
            async with Client(server) as raw:
                await ar.wrap(raw, session, connector="mcp", undo=table).call_tool("create_note", {"text": "tea"})
                rolled_back = await ar.rollback_session(session)
            assert rolled_back.status is SessionStatus.ROLLED_BACK
            (action,) = rolled_back.actions
            assert (action.api_name, action.status, action.undo_status) == (
                "notes.create_note",
                ActionStatus.ROLLED_BACK,
                UndoStatus.DONE,
            )

    try:
        asyncio.run(scenario())
    finally:
        served.stop()
    assert kept == []  # undone once

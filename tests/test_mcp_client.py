"""The mcp connector through a wrapped ``mcp.Client`` (DESIGN §4a): the reference MCP servers from npm, driven over
stdio by the official Python SDK, embedded and through a real server, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from agentrein import (
    ActionStatus,
    AsyncAgentRein,
    OperationType,
    PolicyBlockedError,
    SessionStatus,
    ValidationError,
)
from agentrein_core.model import UNDO_NONE
from agentrein_mcp import McpConnector, McpToolError

SERVERS = Path(__file__).parent.parent / "contract" / "mcp-servers" / "node_modules" / "@modelcontextprotocol"
NODE = shutil.which("node") or "node"


def memory_server(folder: Path) -> StdioServerParameters:
    """The reference knowledge-graph server, keeping its graph in a file of this test's."""
    script = str(SERVERS / "server-memory" / "dist" / "index.js")
    env = {"MEMORY_FILE_PATH": str(folder / "memory.jsonl"), "PATH": os.environ["PATH"]}
    return StdioServerParameters(command=NODE, args=[script], env=env)


def filesystem_server(folder: Path) -> StdioServerParameters:
    script = str(SERVERS / "server-filesystem" / "dist" / "index.js")
    return StdioServerParameters(command=NODE, args=[script, str(folder)], env={"PATH": os.environ["PATH"]})


@pytest.fixture(params=["embedded", "server"])
def mode(request: pytest.FixtureRequest, database_url: str) -> Callable[[], AsyncAgentRein]:
    """Makes AsyncAgentRein in an organisation of its own: embedded on the database, and through a real server
    (whose rollbacks hand the MCP undos back to this process)."""
    if request.param == "embedded":
        organisation = f"test-{uuid.uuid4().hex[:8]}"
        return lambda: AsyncAgentRein(database_url, organisation=organisation)
    tenant = request.getfixturevalue("server").tenant()
    return lambda: AsyncAgentRein(base_url=tenant.url, api_key=tenant.key)


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(scenario())


async def graph(params: StdioServerParameters) -> dict[str, Any]:
    """The knowledge graph as the server holds it, read by a client of its own."""
    async with Client(params) as raw:
        result = await raw.call_tool("read_graph", {})
        assert result.structured_content is not None
        return result.structured_content


ADA_AND_BOB = {
    "entities": [
        {"name": "ada", "entityType": "person", "observations": ["writes programs"]},
        {"name": "bob", "entityType": "person", "observations": []},
    ]
}


def test_a_tool_call_is_recorded_as_server_dot_tool_with_its_arguments_and_answer(
    mode: Callable[[], AsyncAgentRein], tmp_path: Path
) -> None:
    async def scenario() -> None:
        async with mode() as ar:
            s = await ar.new_session(agent_id="notes-agent", intent="File today's notes")
            async with Client(memory_server(tmp_path)) as raw:
                memory = ar.wrap(raw, s, connector="mcp", server="memory")
                result = await memory.call_tool("create_entities", ADA_AND_BOB)
                assert isinstance(memory, Client)  # the wrapped client keeps its type
            (action,) = (await ar.get_session(s)).actions
        assert result.structured_content is not None
        assert action.api_name == "memory.create_entities"
        assert (action.status, action.operation_type) == (ActionStatus.SUCCESS, OperationType.CREATE)
        assert action.payload["arguments"] == ADA_AND_BOB
        assert action.payload["title"] == "Create Entities"
        assert action.response == {"result": result.structured_content}
        assert action.undo is not None and action.undo.type == "mcp-tools"
        assert action.undo.params["calls"] == [
            {"tool": "delete_entities", "arguments": {"entityNames": ["ada", "bob"]}, "about": ["ada", "bob"]}
        ]

    run(scenario)


def test_the_server_name_defaults_to_the_name_the_server_gives_itself(
    mode: Callable[[], AsyncAgentRein], tmp_path: Path
) -> None:
    async def scenario() -> None:
        async with mode() as ar:
            s = await ar.new_session(agent_id="notes-agent")
            async with Client(memory_server(tmp_path)) as raw:
                await ar.wrap(raw, s, connector="mcp").call_tool("create_entities", ADA_AND_BOB)
            (action,) = (await ar.get_session(s)).actions
        assert action.api_name == "memory-server.create_entities"

    run(scenario)


def test_read_only_tools_and_listings_pass_through_unrecorded(
    mode: Callable[[], AsyncAgentRein], tmp_path: Path
) -> None:
    async def scenario() -> None:
        async with mode() as ar:
            s = await ar.new_session(agent_id="notes-agent")
            async with Client(memory_server(tmp_path)) as raw:
                memory = ar.wrap(raw, s, connector="mcp", server="memory")
                tools = await memory.list_tools()
                await memory.call_tool("read_graph", {})
                await memory.call_tool("search_nodes", {"query": "ada"})
            assert (await ar.get_session(s)).actions == []
        assert any(t.name == "read_graph" and t.annotations and t.annotations.read_only_hint for t in tools.tools)

    run(scenario)


def test_a_rollback_after_the_client_closed_undoes_every_call_last_first_through_a_new_connection(
    mode: Callable[[], AsyncAgentRein], tmp_path: Path
) -> None:
    params = memory_server(tmp_path)

    async def scenario() -> None:
        async with mode() as ar:
            s = await ar.new_session(agent_id="notes-agent")
            async with Client(params) as raw:
                memory = ar.wrap(raw, s, connector="mcp", server="memory")
                await memory.call_tool("create_entities", ADA_AND_BOB)
                await memory.call_tool(
                    "add_observations", {"observations": [{"entityName": "ada", "contents": ["likes tea"]}]}
                )
                await memory.call_tool("delete_entities", {"entityNames": ["bob"]})
            assert [e["name"] for e in (await graph(params))["entities"]] == ["ada"]
            rolled_back = await ar.rollback_session(s)
        assert rolled_back.status is SessionStatus.ROLLED_BACK
        assert [a.status for a in rolled_back.actions] == [ActionStatus.ROLLED_BACK] * 3
        assert (await graph(params))["entities"] == []

    run(scenario)


def test_a_deleted_entity_comes_back_with_its_observations_from_the_read_made_before_the_delete(
    mode: Callable[[], AsyncAgentRein], tmp_path: Path
) -> None:
    params = memory_server(tmp_path)

    async def scenario() -> None:
        async with Client(params) as raw:  # made before the session: the rollback leaves it be
            await raw.call_tool("create_entities", ADA_AND_BOB)
        async with mode() as ar:
            s = await ar.new_session(agent_id="notes-agent")
            async with Client(params) as raw:
                memory = ar.wrap(raw, s, connector="mcp", server="memory")
                await memory.call_tool("delete_entities", {"entityNames": ["ada"]})
                (action,) = (await ar.get_session(s)).actions
                assert (action.operation_type, action.undo.type if action.undo else None) == (
                    OperationType.DELETE,
                    "mcp-tools",
                )
                await ar.rollback_session(s)  # while the client is open: through it
        entities = {e["name"]: e for e in (await graph(params))["entities"]}
        assert entities["ada"]["observations"] == ["writes programs"]

    run(scenario)


def test_a_tool_error_fails_the_call_and_rolls_the_session_back(
    mode: Callable[[], AsyncAgentRein], tmp_path: Path
) -> None:
    params = memory_server(tmp_path)

    async def scenario() -> None:
        async with mode() as ar:
            s = await ar.new_session(agent_id="notes-agent")
            async with Client(params) as raw:
                memory = ar.wrap(raw, s, connector="mcp", server="memory")
                await memory.call_tool("create_entities", ADA_AND_BOB)
                with pytest.raises(McpToolError, match="not found") as raised:
                    await memory.call_tool(
                        "add_observations", {"observations": [{"entityName": "nobody", "contents": ["x"]}]}
                    )
                assert raised.value.result.is_error
            session = await ar.get_session(s)
        assert [a.status for a in session.actions] == [ActionStatus.ROLLED_BACK, ActionStatus.FAILED]
        assert (await graph(params))["entities"] == []

    run(scenario)


def test_on_tool_error_record_returns_the_error_to_the_agent_and_rolls_nothing_back(
    mode: Callable[[], AsyncAgentRein], tmp_path: Path
) -> None:
    params = memory_server(tmp_path)

    async def scenario() -> None:
        async with mode() as ar:
            s = await ar.new_session(agent_id="notes-agent")
            async with Client(params) as raw:
                memory = ar.wrap(raw, s, connector="mcp", server="memory", on_tool_error="record")
                await memory.call_tool("create_entities", ADA_AND_BOB)
                result = await memory.call_tool(
                    "add_observations", {"observations": [{"entityName": "nobody", "contents": ["x"]}]}
                )
            session = await ar.get_session(s)
        assert result.is_error
        assert session.status is SessionStatus.ACTIVE
        assert [a.status for a in session.actions] == [ActionStatus.SUCCESS, ActionStatus.FAILED]
        assert "not found" in (session.actions[1].error or "")
        assert len((await graph(params))["entities"]) == 2

    run(scenario)


def test_a_block_policy_on_an_mcp_api_name_glob_stops_the_tool_call(
    mode: Callable[[], AsyncAgentRein], tmp_path: Path
) -> None:
    params = memory_server(tmp_path)

    async def scenario() -> None:
        async with mode() as ar:
            await ar.add_policy("no deletes", "BLOCK", connector="mcp", api_name="memory.delete_*")
            s = await ar.new_session(agent_id="notes-agent")
            async with Client(params) as raw:
                memory = ar.wrap(raw, s, connector="mcp", server="memory")
                await memory.call_tool("create_entities", ADA_AND_BOB)
                with pytest.raises(PolicyBlockedError):
                    await memory.call_tool("delete_entities", {"entityNames": ["ada"]})
        assert len((await graph(params))["entities"]) == 2  # the blocked call never reached the server

    run(scenario)


def test_a_tool_named_alone_in_requires_approval_is_held_until_a_reviewer_approves(
    mode: Callable[[], AsyncAgentRein], tmp_path: Path
) -> None:
    params = memory_server(tmp_path)

    async def scenario() -> None:
        async with mode() as ar:
            s = await ar.new_session(agent_id="notes-agent")
            async with Client(params) as raw:
                memory = ar.wrap(
                    raw, s, connector="mcp", server="memory", requires_approval=["delete_*"], poll_interval_ms=50
                )
                await memory.call_tool("create_entities", ADA_AND_BOB)
                held = asyncio.create_task(memory.call_tool("delete_entities", {"entityNames": ["bob"]}))
                while not (pending := await ar.list_approvals("PENDING")):
                    await asyncio.sleep(0.05)
                assert not held.done()
                await ar.approve(pending[0].approval_id, reviewer="ops")
                await held
        assert [e["name"] for e in (await graph(params))["entities"]] == ["ada"]

    run(scenario)


def test_a_file_written_over_is_restored_and_a_new_file_says_it_cannot_be_undone(
    mode: Callable[[], AsyncAgentRein], tmp_path: Path
) -> None:
    files = tmp_path / "files"
    files.mkdir()
    (files / "notes.txt").write_text("first draft\n")

    async def scenario() -> None:
        async with mode() as ar:
            s = await ar.new_session(agent_id="writer")
            async with Client(filesystem_server(files)) as raw:
                fs = ar.wrap(raw, s, connector="mcp", server="filesystem")
                await fs.call_tool("write_file", {"path": str(files / "notes.txt"), "content": "second draft\n"})
                await fs.call_tool("write_file", {"path": str(files / "new.txt"), "content": "hello\n"})
            written_over, new_file = (await ar.get_session(s)).actions
            assert new_file.undo is not None and new_file.undo.type == UNDO_NONE
            assert "did not exist" in str(new_file.undo.params["why"])
            assert McpConnector().describe_undo(new_file).startswith("the file did not exist")
            await ar.rollback_session(s)
        assert (files / "notes.txt").read_text() == "first draft\n"
        assert written_over.api_name == "filesystem.write_file"

    run(scenario)


def test_a_moved_file_is_moved_back(mode: Callable[[], AsyncAgentRein], tmp_path: Path) -> None:
    files = tmp_path / "files"
    files.mkdir()
    (files / "a.txt").write_text("a\n")

    async def scenario() -> None:
        async with mode() as ar:
            s = await ar.new_session(agent_id="writer")
            async with Client(filesystem_server(files)) as raw:
                fs = ar.wrap(raw, s, connector="mcp", server="filesystem")
                await fs.call_tool("move_file", {"source": str(files / "a.txt"), "destination": str(files / "b.txt")})
            assert sorted(p.name for p in files.iterdir()) == ["b.txt"]
            await ar.rollback_session(s)
        assert sorted(p.name for p in files.iterdir()) == ["a.txt"]

    run(scenario)


def test_a_users_table_file_overrides_the_built_in_entry_of_its_tool(
    mode: Callable[[], AsyncAgentRein], tmp_path: Path
) -> None:
    table = tmp_path / "memory-undo.yaml"
    table.write_text(
        "server: memory\n"
        "tools:\n"
        "  create_entities:\n"
        "    undo: none\n"
        "    why: the notes are kept on purpose\n"
        "    requireApproval: true\n"
    )

    async def scenario() -> None:
        async with mode() as ar:
            s = await ar.new_session(agent_id="notes-agent")
            async with Client(memory_server(tmp_path)) as raw:
                memory = ar.wrap(raw, s, connector="mcp", server="memory", undo=table)
                await memory.call_tool("create_entities", ADA_AND_BOB)
                await memory.call_tool("delete_entities", {"entityNames": ["bob"]})  # still the built-in entry
            created, deleted = (await ar.get_session(s)).actions
        assert created.undo is not None and created.undo.type == UNDO_NONE
        assert created.undo.params["why"] == "the notes are kept on purpose"
        assert deleted.undo is not None and deleted.undo.type == "mcp-tools"

    run(scenario)


def test_an_undo_expression_that_finds_nothing_fails_the_rollback_with_its_reason(
    mode: Callable[[], AsyncAgentRein], tmp_path: Path
) -> None:
    table = {
        "tools": {"create_entities": {"undo": {"tool": "delete_entities", "arguments": {"entityNames": "result.ids"}}}}
    }

    async def scenario() -> None:
        async with mode() as ar:
            s = await ar.new_session(agent_id="notes-agent")
            async with Client(memory_server(tmp_path)) as raw:
                memory = ar.wrap(raw, s, connector="mcp", server="memory", undo=table)
                await memory.call_tool("create_entities", ADA_AND_BOB)
            with pytest.raises(Exception, match=r"entityNames \(result.ids\) found nothing"):
                await ar.rollback_session(s)
            (action,) = (await ar.get_session(s)).actions
        assert action.status is ActionStatus.ROLLBACK_FAILED

    run(scenario)


@pytest.mark.parametrize(
    ("table", "field"),
    [
        ({"tools": {"create_entities": {"undo": {"arguments": {}}}}}, "undo.tools.create_entities.undo"),
        ({"tools": {"x": {"undo": {"tool": "y", "arguments": {"a": "result.[["}}}}}, "undo.tools.x.undo.arguments.a"),
        ({"tools": {"x": {"operation": "ERASE"}}}, "undo.tools.x.operation"),
        ({"tools": {"x": {"unknown": 1}}}, "undo.tools.x.unknown"),
    ],
)
def test_a_bad_undo_table_is_refused_at_wrap_naming_the_part_at_fault(
    table: dict[str, Any], field: str, tmp_path: Path
) -> None:
    async def scenario() -> None:
        async with AsyncAgentRein(f"sqlite:///{tmp_path / 'a.db'}") as ar:
            s = await ar.new_session(agent_id="notes-agent")
            async with Client(memory_server(tmp_path)) as raw:
                with pytest.raises(ValidationError) as refused:
                    ar.wrap(raw, s, connector="mcp", undo=table)
        assert refused.value.field == field

    run(scenario)


def test_the_built_in_tables_are_the_ones_in_the_cross_language_contract() -> None:
    from agentrein_mcp.tables import built_in_tables

    contract = Path(__file__).parent.parent / "contract" / "mcp"
    names = {json.loads(p.read_text())["serverInfo"] for p in contract.glob("*.json")}
    assert {t.server_info for t in built_in_tables()} == names == {"memory-server", "secure-filesystem-server"}

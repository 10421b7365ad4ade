"""Server-side undo of MCP tool calls through the organisation's ``mcp`` connector settings (DESIGN §4a, §8): a
real AgentRein server, a real MCP server over streamable HTTP on 127.0.0.1 (the ``mcp`` SDK's ``MCPServer``
under uvicorn), and the reference memory server started by a command the server's administrator declared.
The conftest sets AGENTREIN_ALLOW_PRIVATE_TARGETS=1, so loopback targets are allowed unless a test removes it."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
import uvicorn
from cryptography.fernet import Fernet
from dashboard import account, visitor
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp_servers import memory_server, node, script
from serving import RunningServer, ServerProcess, Tenant, free_port
from test_dashboard import session_that_ran

from agentrein import AsyncAgentRein, SessionInfo
from agentrein_cli.reach import engine
from agentrein_core.errors import UndoError, ValidationError
from agentrein_core.model import UndoConfig
from agentrein_core.statuses import ActionStatus
from agentrein_core.targets import ALLOW_PRIVATE_ENV
from agentrein_mcp import McpConnector
from agentrein_mcp.pinned import pinned_async_client
from agentrein_mcp.servers import COMMANDS_ENV

#: The notes server's undo table: a note added is removed.
NOTES_TABLE = {
    "tools": {
        "add_note": {"undo": {"tool": "remove_note", "arguments": {"note_id": "result.id"}}},
        "remove_note": {"operation": "DELETE"},
    }
}
SECRET = "Bearer notes-secret-8c1f"
ADA = {"entities": [{"name": "ada", "entityType": "person", "observations": ["writes programs"]}]}


class Notes:
    """A stateful MCP server over streamable HTTP on 127.0.0.1: notes by id, and the headers of every request."""

    def __init__(self) -> None:
        self.notes: dict[str, str] = {}
        self.headers: list[dict[str, str]] = []
        server = MCPServer("notes")

        @server.tool()
        def add_note(text: str) -> dict[str, Any]:
            note_id = f"n{len(self.notes) + 1}"
            self.notes[note_id] = text
            return {"id": note_id}

        @server.tool()
        def remove_note(note_id: str) -> dict[str, Any]:
            return {"removed": self.notes.pop(note_id, None)}

        app = server.streamable_http_app()

        async def recorded(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                self.headers.append({k.decode(): v.decode() for k, v in scope["headers"]})
            await app(scope, receive, send)

        port = free_port()
        self.url = f"http://127.0.0.1:{port}/mcp"
        self._server = uvicorn.Server(uvicorn.Config(recorded, host="127.0.0.1", port=port, log_level="warning"))
        self._thread = threading.Thread(target=self._server.run, name="notes-mcp-server", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the notes MCP server did not start")
            time.sleep(0.02)

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=30)


@pytest.fixture
def notes() -> Iterator[Notes]:
    upstream = Notes()
    yield upstream
    upstream.stop()


#: An agent in a process of its own: one session, one guarded ``add_note`` through the notes server, then it exits.
AGENT = """
import asyncio, json, sys
from mcp import Client
from agentrein import AsyncAgentRein

async def main(url, key, upstream, table):
    async with AsyncAgentRein(base_url=url, api_key=key) as ar:
        s = await ar.new_session(agent_id="notes-agent", intent="Take notes")
        async with Client(upstream) as raw:
            await ar.wrap(raw, s, connector="mcp", server="notes", undo=table).call_tool("add_note", {"text": "tea"})
        print(s.id)

asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])))
"""


def agent_adds_a_note(tenant: Tenant, notes: Notes) -> str:
    """Runs the agent's process to its end; the session's id."""
    done = subprocess.run(
        [sys.executable, "-c", AGENT, tenant.url, tenant.key, notes.url, json.dumps(NOTES_TABLE)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


async def agent_remembers_ada(
    tenant: Tenant, folder: Path, while_open: Callable[[AsyncAgentRein, SessionInfo], Awaitable[None]] | None = None
) -> SessionInfo:
    """An agent recording through the server creates entity ada on the memory server (its graph in ``folder``),
    and does ``while_open`` before its client and itself close; the session."""
    async with AsyncAgentRein(base_url=tenant.url, api_key=tenant.key) as ar:
        s = await ar.new_session(agent_id="memory-agent", intent="Remember people")
        async with Client(memory_server(folder)) as raw:
            await ar.wrap(raw, s, connector="mcp", server="memory").call_tool("create_entities", ADA)
            if while_open is not None:
                await while_open(ar, s)
        return s


def declare_commands(folder: Path, monkeypatch: pytest.MonkeyPatch, declared: dict[str, Any]) -> Path:
    """As a server's administrator would: the file of MCP commands ``declared``, named by the variable (read
    again at each use, so a test may write it anew); the file."""
    commands = folder / "mcp-commands.json"
    commands.write_text(json.dumps(declared))
    monkeypatch.setenv(COMMANDS_ENV, str(commands))
    return commands


def memory_command(folder: Path, organizations: list[str]) -> dict[str, Any]:
    """The reference memory server as a declared command for ``organizations``, its graph in
    ``folder / "memory.jsonl"``."""
    # env(1) gives the declared server its graph file: the server starts commands with PATH and HOME only
    argv = ["env", f"MEMORY_FILE_PATH={folder / 'memory.jsonl'}", node(), script("server-memory")]
    return {"command": argv, "organizations": organizations}


def operator(tenant: Tenant) -> httpx.Client:
    return httpx.Client(base_url=tenant.url, headers={"Authorization": f"Bearer {tenant.key}"}, timeout=60)


def configure(tenant: Tenant, config: dict[str, Any], credentials: dict[str, Any] | None = None) -> httpx.Response:
    with operator(tenant) as api:
        return api.put("/connectors/mcp", json={"enabled": True, "config": config, "credentials": credentials})


def rolled_back(tenant: Tenant, session_id: str) -> dict[str, Any]:
    with operator(tenant) as api:
        started = api.post(f"/sessions/{session_id}/rollback")
        assert started.status_code == 202, started.text
        job = api.get(f"/sessions/{session_id}/rollback", params={"wait": 60}).json()
        assert job["status"] in ("SUCCEEDED", "FAILED"), job
        session: dict[str, Any] = api.get(f"/sessions/{session_id}").json()
        session["job"] = job
        return session


def test_an_mcp_call_is_undone_upstream_by_the_server_after_the_agent_process_has_exited(
    server: RunningServer, notes: Notes
) -> None:
    tenant = server.tenant(http_undo=False)
    session_id = agent_adds_a_note(tenant, notes)
    assert notes.notes == {"n1": "tea"}
    assert configure(tenant, {"servers": {"notes": {"url": notes.url}}}).status_code == 200
    session = rolled_back(tenant, session_id)
    assert session["job"]["status"] == "SUCCEEDED", session["job"]
    assert [a["status"] for a in session["actions"]] == [ActionStatus.ROLLED_BACK]
    assert notes.notes == {}  # the undo ran upstream


def test_headers_from_the_credentials_reach_the_upstream_and_are_neither_stored_in_clear_nor_shown(
    server: RunningServer, notes: Notes
) -> None:
    tenant = server.tenant(http_undo=False)
    session_id = agent_adds_a_note(tenant, notes)
    stored = configure(tenant, {"servers": {"notes": {"url": notes.url}}}, {"headers": {"notes": {"X-Notes": SECRET}}})
    assert stored.status_code == 200, stored.text
    seen_before = len(notes.headers)
    assert rolled_back(tenant, session_id)["job"]["status"] == "SUCCEEDED"
    sent = notes.headers[seen_before:]
    assert sent and all(h.get("x-notes") == SECRET for h in sent)  # every request of the undo's connection
    assert all("x-notes" not in h for h in notes.headers[:seen_before])  # the agent's own calls had none
    with operator(tenant) as api:
        assert SECRET not in api.get("/connectors/mcp").text and SECRET not in api.get("/connectors").text
    settings = server.engine.accounts.connector_config(tenant.org_id, "mcp")
    assert settings is not None and settings.credentials is not None and SECRET not in settings.credentials


def test_agentrein_serve_given_the_administrators_command_file_undoes_through_a_declared_command(
    own_database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real `agentrein serve` process, the file named by its variable, the undo run by its workers."""
    commands = declare_commands(tmp_path, monkeypatch, {})
    served = ServerProcess(own_database_url, Fernet.generate_key().decode())
    try:
        (key,) = served.printed_keys
        with engine(own_database_url) as found:  # the organisation `agentrein serve` made: as `agentrein orgs list`
            org_id = found.accounts.organisation_named("default").org_id
        commands.write_text(json.dumps({"team-memory": memory_command(tmp_path, [org_id])}))
        graph_file = tmp_path / "memory.jsonl"
        tenant = Tenant(org_id, key, served.url)
        session = asyncio.run(agent_remembers_ada(tenant, tmp_path))
        assert "ada" in graph_file.read_text()
        assert configure(tenant, {"servers": {"memory": {"command": "not-declared"}}}).status_code == 400
        assert configure(tenant, {"servers": {"memory": {"command": "team-memory"}}}).status_code == 200
        assert rolled_back(tenant, session.id)["job"]["status"] == "SUCCEEDED"
        assert "ada" not in graph_file.read_text()
    finally:
        served.stop()


def test_a_declared_command_that_exits_at_once_fails_the_undo_saying_the_connection_closed(
    server: RunningServer, notes: Notes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tenant = server.tenant(http_undo=False)
    declare_commands(tmp_path, monkeypatch, {"broken": {"command": ["false"], "organizations": [tenant.org_id]}})
    session_id = agent_adds_a_note(tenant, notes)
    assert configure(tenant, {"servers": {"notes": {"command": "broken"}}}).status_code == 200
    session = rolled_back(tenant, session_id)
    assert session["job"]["status"] == "FAILED"
    assert session["job"]["error"] == "undo failed: MCP server 'notes' (command 'broken'): Connection closed"


@pytest.mark.parametrize("command", ["not-declared", "node /tmp/evil.js"])
def test_an_organisation_cannot_name_a_command_the_administrator_did_not_declare(
    server: RunningServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    tenant = server.tenant(http_undo=False)
    declare_commands(
        tmp_path, monkeypatch, {"team-memory": {"command": ["node", "memory.js"], "organizations": [tenant.org_id]}}
    )
    refused = configure(tenant, {"servers": {"memory": {"command": command}}})
    assert refused.status_code == 400 and refused.headers["content-type"].startswith("application/problem+json")
    detail = refused.json()["detail"]
    assert "config.servers.memory.command" in detail and "declared for this organisation (team-memory)" in detail


def test_an_organisation_cannot_name_a_command_declared_for_another_and_is_not_told_its_name(
    server: RunningServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ours, theirs = server.tenant(http_undo=False), server.tenant(http_undo=False)
    declared = {"their-files": {"command": ["node", "files.js"], "organizations": [theirs.org_id]}}
    declare_commands(tmp_path, monkeypatch, declared)
    refused = configure(ours, {"servers": {"files": {"command": "their-files"}}})
    assert refused.status_code == 400 and refused.headers["content-type"].startswith("application/problem+json")
    detail = refused.json()["detail"]
    assert "config.servers.files.command" in detail and "declared for this organisation (none are)" in detail
    assert configure(theirs, {"servers": {"files": {"command": "their-files"}}}).status_code == 200


@pytest.mark.parametrize(
    "entry", [["node", "memory.js"], {"command": ["node", "memory.js"]}], ids=["earlier-form", "no-list"]
)
def test_a_command_declared_with_no_list_of_organisations_is_offered_to_none(
    server: RunningServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entry: object
) -> None:
    declare_commands(tmp_path, monkeypatch, {"team-memory": entry})
    refused = configure(server.tenant(http_undo=False), {"servers": {"memory": {"command": "team-memory"}}})
    assert refused.status_code == 400
    assert "declared for this organisation (none are)" in refused.json()["detail"]


def test_a_malformed_file_of_commands_is_refused_naming_its_form(
    server: RunningServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    declare_commands(tmp_path, monkeypatch, {"team-memory": {"command": ["node"], "organizations": "everyone"}})
    refused = configure(server.tenant(http_undo=False), {"servers": {"memory": {"command": "team-memory"}}})
    assert refused.status_code == 400
    assert COMMANDS_ENV in refused.json()["detail"] and '"organizations": ["org_...", ...]' in refused.json()["detail"]


def test_an_undo_through_a_command_no_longer_declared_for_its_organisation_fails_saying_so_and_starts_nothing(
    server: RunningServer, notes: Notes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tenant, other = server.tenant(http_undo=False), server.tenant(http_undo=False)
    started = tmp_path / "started"
    argv = ["touch", str(started)]
    commands = declare_commands(tmp_path, monkeypatch, {"notes": {"command": argv, "organizations": [tenant.org_id]}})
    session_id = agent_adds_a_note(tenant, notes)
    assert configure(tenant, {"servers": {"notes": {"command": "notes"}}}).status_code == 200
    commands.write_text(json.dumps({"notes": {"command": argv, "organizations": [other.org_id]}}))
    session = rolled_back(tenant, session_id)
    assert session["job"]["status"] == "FAILED"
    assert "'notes'" in session["job"]["error"] and "for this organisation" in session["job"]["error"]
    assert not started.exists() and notes.notes == {"n1": "tea"}


def test_the_server_client_of_an_organisation_a_command_is_not_declared_for_cannot_reach_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Judged again when the undo runs, whatever the settings passed when stored."""
    declare_commands(tmp_path, monkeypatch, {"notes": {"command": ["node", "notes.js"], "organizations": ["org_a"]}})
    config = {"servers": {"notes": {"command": "notes"}}}
    assert McpConnector().server_client(config, {}, "org_a").binding("notes").server == "notes"
    with pytest.raises(UndoError, match="no longer declares MCP command 'notes' for this organisation"):
        McpConnector().server_client(config, {}, "org_b").binding("notes")


def test_a_loopback_url_is_refused_when_stored_without_the_variable_and_nothing_reaches_it(
    server: RunningServer, notes: Notes, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ALLOW_PRIVATE_ENV)
    refused = configure(server.tenant(http_undo=False), {"servers": {"notes": {"url": notes.url}}})
    assert refused.status_code == 400, refused.text
    detail = refused.json()["detail"]
    assert "config.servers.notes.url" in detail and "127.0.0.1" in detail and ALLOW_PRIVATE_ENV in detail
    assert notes.headers == []


def test_a_loopback_url_stored_while_allowed_fails_the_undo_naming_the_variable_before_anything_is_sent(
    server: RunningServer, notes: Notes, monkeypatch: pytest.MonkeyPatch
) -> None:
    tenant = server.tenant(http_undo=False)
    session_id = agent_adds_a_note(tenant, notes)
    assert configure(tenant, {"servers": {"notes": {"url": notes.url}}}).status_code == 200
    seen_before = len(notes.headers)
    monkeypatch.delenv(ALLOW_PRIVATE_ENV)
    session = rolled_back(tenant, session_id)
    assert session["job"]["status"] == "FAILED"
    assert ALLOW_PRIVATE_ENV in session["job"]["error"] and "config.servers.notes.url" in session["job"]["error"]
    assert len(notes.headers) == seen_before and notes.notes == {"n1": "tea"}


def test_the_pinned_mcp_http_client_refuses_a_loopback_address_before_connecting(
    notes: Notes, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ALLOW_PRIVATE_ENV)

    async def request() -> None:
        async with pinned_async_client("config.servers.notes.url") as http:
            await http.post(notes.url, json={})

    with pytest.raises(ValidationError) as refused:
        asyncio.run(request())
    assert "config.servers.notes.url" in str(refused.value) and ALLOW_PRIVATE_ENV in str(refused.value)
    assert notes.headers == []


def test_a_connection_to_a_server_whose_address_is_now_private_is_refused_naming_the_variable(
    notes: Notes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stored address was checked; the connection checks again, on the address it connects to."""
    connector = McpConnector()
    servers = connector.server_client({"servers": {"notes": {"url": notes.url}}}, {}, "org_test")
    undo = UndoConfig(
        "mcp-tools", {"server": "notes", "calls": [{"tool": "remove_note", "arguments": {"note_id": "n1"}}]}
    )
    monkeypatch.delenv(ALLOW_PRIVATE_ENV)
    with pytest.raises(ValidationError) as refused:
        asyncio.run(connector.run_undo(undo, servers, "undo-key"))
    assert "config.servers.notes.url" in str(refused.value) and ALLOW_PRIVATE_ENV in str(refused.value)
    assert notes.headers == []


def test_an_undo_on_a_server_the_settings_do_not_name_is_handed_to_the_agent_process_as_before(
    server: RunningServer, notes: Notes, tmp_path: Path
) -> None:
    tenant = server.tenant(http_undo=False)
    assert configure(tenant, {"servers": {"notes": {"url": notes.url}}}).status_code == 200

    async def roll_back_while_open(ar: AsyncAgentRein, s: SessionInfo) -> None:
        (action,) = server.engine.recording.get_session(tenant.org_id, s.id).actions
        obstacles = server.services.undo.obstacles(tenant.org_id, [action])
        assert "MCP server 'memory' is not among the servers" in obstacles[action.action_id].reason
        assert "handed to the agent process" in obstacles[action.action_id].reason
        await ar.rollback_session(s)  # this process takes the handed undo, through its open client

    session = asyncio.run(agent_remembers_ada(tenant, tmp_path, roll_back_while_open))
    assert "ada" not in (tmp_path / "memory.jsonl").read_text()
    (action,) = server.engine.recording.get_session(tenant.org_id, session.id).actions
    assert action.status is ActionStatus.ROLLED_BACK


def test_an_undo_on_a_server_the_settings_name_has_no_obstacle(server: RunningServer, notes: Notes) -> None:
    tenant = server.tenant(http_undo=False)
    session_id = agent_adds_a_note(tenant, notes)
    assert configure(tenant, {"servers": {"notes": {"url": notes.url}}}).status_code == 200
    actions = server.engine.recording.get_session(tenant.org_id, session_id).actions
    assert server.services.undo.obstacles(tenant.org_id, actions) == {}


def test_an_undo_naming_another_server_than_its_call_was_made_on_is_never_run_by_the_server(
    server: RunningServer, notes: Notes
) -> None:
    tenant = server.tenant(http_undo=False)
    session_id = agent_adds_a_note(tenant, notes)
    config = {"servers": {"notes": {"url": notes.url}, "other": {"url": notes.url}}}
    assert configure(tenant, config).status_code == 200
    (action,) = server.engine.recording.get_session(tenant.org_id, session_id).actions
    assert action.undo is not None
    # As an agent could confirm it: the undo's calls aimed at another server the organisation configured.
    elsewhere = attrs.evolve(action, undo=attrs.evolve(action.undo, params={**action.undo.params, "server": "other"}))
    reason = McpConnector().not_reached(config, elsewhere)
    assert reason == "its undo names MCP server 'other', not the server its call notes.add_note was made on"
    assert McpConnector().not_reached(config, action) is None


def test_the_rollback_confirmation_says_which_mcp_undo_is_handed_to_the_agent_and_which_runs_here(
    server: RunningServer, notes: Notes
) -> None:
    tenant = server.tenant(http_undo=False)
    assert configure(tenant, {"servers": {"notes": {"url": notes.url}}}).status_code == 200
    calls = [{"tool": "remove_note", "arguments": {"note_id": "n1"}}]
    with operator(tenant) as api:
        session_id = session_that_ran(
            api,
            ("mcp", "notes.add_note", "CREATE", {"type": "mcp-tools", "server": "notes", "calls": calls}),
            ("mcp", "memory.create_entities", "CREATE", {"type": "mcp-tools", "server": "memory", "calls": calls}),
        )
    with visitor(server, account(server, tenant)) as as_admin:
        page = as_admin.get(f"/dashboard/sessions/{session_id}/rollback").text
    assert page.count('class="cannot-run"') == 1
    assert "MCP server &#39;memory&#39; is not among the servers in the organisation&#39;s mcp connector" in page
    assert "handed to the agent process that holds the client it wrapped" in page
    assert "/dashboard/connectors#connector-mcp" in page  # the settings would fix it


def test_the_connectors_page_saves_mcp_servers_typed_as_json_and_refuses_an_undeclared_command_beside_it(
    server: RunningServer, notes: Notes
) -> None:
    tenant = server.tenant(http_undo=False)
    with visitor(server, account(server, tenant)) as as_admin:
        page = as_admin.get("/dashboard/connectors").text
        mcp = page[page.index('id="connector-mcp"') :].split("</section>")[0]
        assert 'name="config.servers"' in mcp and 'name="credentials.headers"' in mcp
        servers = json.dumps({"notes": {"url": notes.url}})
        headers = json.dumps({"notes": {"X-Notes": SECRET}})
        saved = as_admin.post("/dashboard/connectors/mcp", {"config.servers": servers, "credentials.headers": headers})
        assert saved.status_code == 303
        refused = as_admin.post("/dashboard/connectors/mcp", {"config.servers": '{"notes": {"command": "rm -rf /"}}'})
        assert refused.status_code == 400
        assert "is not an MCP command the server&#39;s administrator declared" in refused.text
        assert SECRET not in as_admin.get("/dashboard/connectors").text
    with operator(tenant) as api:
        shown = api.get("/connectors/mcp").json()
    assert shown["config"] == {"servers": {"notes": {"url": notes.url}}} and shown["hasCredentials"]


def test_the_connectors_page_says_the_undos_of_mcp_servers_not_named_are_handed_to_the_agents_process(
    server: RunningServer,
) -> None:
    tenant = server.tenant(http_undo=False)
    with visitor(server, account(server, tenant)) as as_admin:
        page = as_admin.get("/dashboard/connectors").text
    mcp = page[page.index('id="connector-mcp"') :].split("</section>")[0]
    http = page[page.index('id="connector-http"') :].split("</section>")[0]
    assert "handed to the agent process that holds the client" in mcp and "(every one, while it is not enabled)" in mcp
    assert "handed to the agent" not in http  # the http connector's undos fail until it is enabled
    assert "the undos of its actions fail, unless its card says they are handed to the agent's process" in page

"""``agentrein mcp proxy`` as a host uses it: a subprocess launched by the official stdio client, in front of the
reference memory server (run with node, as ``.ci/run`` installs it in contract/mcp-servers), embedded on a
database the tests read with their own AgentRein. One proxy serves the scenarios of a whole host session, in
order, on each database; a disconnect and an upstream that crashes have their own."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Coroutine, Iterator, Sequence
from concurrent.futures import Future
from contextlib import closing
from pathlib import Path
from typing import Any, TypeVar

import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError
from peers import eventually
from serving import RunningServer
from typer.testing import CliRunner

from agentrein import ActionStatus, AgentRein, ApprovalStatus, SessionStatus
from agentrein_cli.main import app
from agentrein_cli.mcp_proxy import FINISH_SECONDS

T = TypeVar("T")

ROOT = Path(__file__).resolve().parent.parent
MEMORY_SERVER = ROOT / "contract/mcp-servers/node_modules/@modelcontextprotocol/server-memory/dist/index.js"
#: The ``agentrein`` command, as the environment that runs the tests installed it.
AGENTREIN = Path(sys.executable).parent / "agentrein"
HOST = types.Implementation(name="test-host", version="1.0")

#: A server that uses what the memory server does not: instructions, a resource, a prompt, and a tool that
#: reports progress, logs, and asks the host for a completion and for its roots.
ASKING_SERVER = """
import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("asking", instructions="Ask the host first.")

@server.resource("note://today")
def today() -> str:
    return "buy milk"

@server.prompt()
def greet(name: str) -> str:
    return f"Say hello to {name}"

@server.tool()
async def ask_host(question: str, ctx: Context) -> str:
    await ctx.report_progress(1, 2, "asking")
    await ctx.info("asking the host")
    message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text=question))
    answer = await ctx.session.create_message([message], max_tokens=10)
    roots = await ctx.session.list_roots()
    await ctx.report_progress(2, 2, "answered")
    return f"{answer.content.text} under {roots.roots[0].uri}"

server.run()
"""

#: A server over streamable HTTP whose tool answers the credentials it was sent.
HTTP_SERVER = """
import sys
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("remote")

@server.tool()
def whoami(ctx: Context) -> str:
    return ctx.request_context.request.headers.get("authorization", "nobody")

server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
"""

#: A server that exits in the middle of its one tool call (an upstream that crashes).
CRASHING_SERVER = """
import os
from mcp.server.mcpserver import MCPServer

server = MCPServer("crashing")

@server.tool()
def explode(target: str) -> str:
    os._exit(3)

server.run()
"""


#: A server whose one tool takes a while: it says when it has started (a file), then answers 3 s later.
SLOW_SERVER = """
import sys
from pathlib import Path
import anyio
from mcp.server.mcpserver import MCPServer

server = MCPServer("slow")

@server.tool()
async def create_note(text: str) -> str:
    Path(sys.argv[1]).write_text(text)
    await anyio.sleep(3)
    return "noted"

server.run()
"""


class Host:
    """An MCP host connected to a proxy: its client lives on a loop of its own (a thread), so that one
    connection serves several tests; ``run`` awaits a coroutine there."""

    def __init__(self, params: StdioServerParameters, errlog: Path, **client_options: Any) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.errlog = errlog
        self._connected = threading.Event()
        self._stop = asyncio.Event()
        self._life = asyncio.run_coroutine_threadsafe(self._connection(params, client_options), self.loop)
        while not self._connected.wait(0.1):
            if self._life.done():
                self._life.result()  # the connection failed: say why

    async def _connection(self, params: StdioServerParameters, options: dict[str, Any]) -> None:
        """The client's whole life in one task, as anyio requires: connected, then closed when told."""
        with self.errlog.open("w") as errors:
            transport = stdio_client(params, errlog=errors)
            async with Client(transport, mode="legacy", client_info=HOST, **options) as client:
                self.client = client
                self._connected.set()
                await self._stop.wait()

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float = 60) -> T:
        future: Future[T] = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        return future.result(timeout)

    def call(self, tool: str, arguments: dict[str, Any], **options: Any) -> types.CallToolResult:
        return self.run(self.client.call_tool(tool, arguments, **options))

    def graph(self) -> dict[str, Any]:
        result = self.call("read_graph", {})
        assert not result.is_error, result
        return result.structured_content or json.loads(text_of(result))

    def disconnect(self) -> None:
        try:
            self.loop.call_soon_threadsafe(self._stop.set)
            self._life.result(60)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()


def proxy(
    database_url: str | None,
    tmp_path: Path,
    *options: str,
    upstream: list[str] | None = None,
    env: dict[str, str] | None = None,
    **client_options: Any,
) -> Host:
    """A host connected to ``agentrein mcp proxy`` in front of the memory server (or ``upstream``), embedded on
    ``database_url`` (else ``options`` name a server)."""
    assert MEMORY_SERVER.exists(), "the reference MCP servers are missing: (cd contract/mcp-servers && npm ci)"
    command = ["--", *(upstream or ["node", str(MEMORY_SERVER)])] if "--upstream-url" not in options else []
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("AGENTREIN_")},
        "MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl"),
        **(env or {}),
    }
    target = ["--database-url", database_url] if database_url else []
    args = ["mcp", "proxy", *target, *options, *command]
    params = StdioServerParameters(command=str(AGENTREIN), args=args, env=env)
    return Host(params, tmp_path / "proxy.stderr", **client_options)


def text_of(result: types.CallToolResult) -> str:
    return " ".join(block.text for block in result.content if isinstance(block, types.TextContent))


def text_of_message(message: Any) -> str:
    content = message.content
    return content.text if isinstance(content, types.TextContent) else str(content)


def entities(*names: str) -> dict[str, Any]:
    return {"entities": [{"name": n, "entityType": "person", "observations": [f"{n} was here"]} for n in names]}


def names_in(graph: dict[str, Any]) -> set[str]:
    return {entity["name"] for entity in graph["entities"]}


def sessions_of(agentrein: AgentRein) -> list[str]:
    """The host's sessions, oldest first."""
    return [s.id for s in sorted(agentrein.list_sessions(), key=lambda s: s.created_at) if s.agent_id == HOST.name]


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def memory_database(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    if request.param == "postgresql":
        return str(request.getfixturevalue("postgres_url"))
    return f"sqlite:///{tmp_path_factory.mktemp('proxy') / 'agentrein.db'}"


@pytest.fixture(scope="module")
def agentrein(memory_database: str) -> Iterator[AgentRein]:
    with AgentRein(memory_database) as found:
        yield found


@pytest.fixture(scope="module")
def host(memory_database: str, agentrein: AgentRein, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Host]:
    connected = proxy(
        memory_database, tmp_path_factory.mktemp("host"), "--name", "memory", "--requires-approval", "delete_entities"
    )
    yield connected
    connected.disconnect()


# One host session, in order ----------------------------------------------------------------------------------


def test_the_host_sees_the_upstream_s_own_name_and_its_tools_with_their_annotations_untouched(
    host: Host, tmp_path: Path
) -> None:
    async def listed_directly() -> types.ListToolsResult:
        params = StdioServerParameters(
            command="node", args=[str(MEMORY_SERVER)], env={"MEMORY_FILE_PATH": str(tmp_path / "direct.jsonl")}
        )
        async with Client(params, mode="legacy") as direct:
            return await direct.list_tools()

    assert host.client.server_info is not None and host.client.server_info.name == "memory-server"
    through_proxy = host.run(host.client.list_tools())
    assert through_proxy.tools == asyncio.run(listed_directly()).tools
    assert any(tool.annotations and tool.annotations.read_only_hint for tool in through_proxy.tools)


def test_a_write_is_recorded_in_the_host_s_session_and_a_read_passes_unrecorded(
    host: Host, agentrein: AgentRein
) -> None:
    created = host.call("create_entities", entities("ada", "bob"))
    assert not created.is_error, created
    assert {"ada", "bob"} <= names_in(host.graph())
    [session_id] = sessions_of(agentrein)
    session = agentrein.get_session(session_id)
    assert session.status == SessionStatus.ACTIVE
    assert [(a.api_name, a.status) for a in session.actions] == [("memory.create_entities", ActionStatus.SUCCESS)]


def test_a_held_call_tells_the_host_it_waits_and_runs_once_a_reviewer_approves_it(
    host: Host, agentrein: AgentRein
) -> None:
    told: list[str] = []
    waiting = threading.Event()

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        told.append(message or "")
        waiting.set()

    call = asyncio.run_coroutine_threadsafe(
        host.client.call_tool("delete_entities", {"entityNames": ["bob"]}, progress_callback=progress), host.loop
    )
    assert waiting.wait(60), "the host was never told that the call waits"
    [pending] = agentrein.list_approvals(ApprovalStatus.PENDING)
    assert pending.approval_id in told[0] and "delete_entities" in told[0]
    assert not call.done()
    agentrein.approve(pending.approval_id, reviewer="oncall", reason="bob left")
    result = call.result(60)
    assert not result.is_error, result
    assert names_in(host.graph()) == {"ada"}


def test_a_blocked_call_answers_the_host_in_words_naming_the_policy_and_never_reaches_the_upstream(
    host: Host, agentrein: AgentRein
) -> None:
    policy = agentrein.add_policy("no relations", "BLOCK", connector="mcp", api_name="memory.create_relations")
    try:
        relation = {"relations": [{"from": "ada", "to": "ada", "relationType": "knows"}]}
        result = host.call("create_relations", relation)
    finally:
        agentrein.remove_policy(policy.policy_id)
    assert result.is_error
    assert "blocked by policy 'no relations'" in text_of(result)
    assert host.graph()["relations"] == []


def test_a_failing_call_answers_the_upstream_s_error_rolls_back_the_session_and_the_next_call_opens_another(
    host: Host, agentrein: AgentRein
) -> None:
    assert not host.call("create_entities", entities("cy")).is_error
    failed = host.call("add_observations", {"observations": [{"entityName": "nobody", "contents": ["hello"]}]})
    assert failed.is_error and "nobody" in text_of(failed)
    [rolled_back] = sessions_of(agentrein)
    assert agentrein.get_session(rolled_back).status == SessionStatus.ROLLED_BACK
    assert names_in(host.graph()) == set()  # what the session created is gone (bob was deleted, then restored)

    assert not host.call("create_entities", entities("dee")).is_error
    first, second = sessions_of(agentrein)
    assert first == rolled_back
    assert [a.api_name for a in agentrein.get_session(second).actions] == ["memory.create_entities"]
    assert names_in(host.graph()) == {"dee"}


def test_a_rejected_call_answers_the_host_with_the_reviewer_s_reason_and_rolls_the_session_back(
    host: Host, agentrein: AgentRein
) -> None:
    call = asyncio.run_coroutine_threadsafe(
        host.client.call_tool("delete_entities", {"entityNames": ["dee"]}), host.loop
    )
    pending: list[Any] = []
    while not pending and not call.done():
        pending = agentrein.list_approvals(ApprovalStatus.PENDING)
    agentrein.reject(pending[0].approval_id, reviewer="oncall", reason="wrong customer")
    result = call.result(60)
    assert result.is_error
    assert "rejected by a reviewer: wrong customer" in text_of(result)
    assert agentrein.get_session(sessions_of(agentrein)[-1]).status == SessionStatus.ROLLED_BACK
    assert names_in(host.graph()) == set()  # dee, created in that session, is undone; the delete never ran


def test_an_approval_nobody_decides_answers_the_host_that_it_expired(host: Host, agentrein: AgentRein) -> None:
    policy = agentrein.add_policy(
        "ask first",
        "REQUIRE_APPROVAL",
        connector="mcp",
        api_name="memory.create_relations",
        before_execution=True,
        approval_timeout_ms=200,
    )
    try:
        result = host.call("create_relations", {"relations": [{"from": "dee", "to": "dee", "relationType": "is"}]})
    finally:
        agentrein.remove_policy(policy.policy_id)
    assert result.is_error
    assert "the approval request expired" in text_of(result)
    assert host.graph()["relations"] == []


# The command ---------------------------------------------------------------------------------------------------


def test_help_prints_a_host_configuration_that_parses_and_launches_the_proxy() -> None:
    shown = CliRunner().invoke(app, ["mcp", "proxy", "--help"], env={"COLUMNS": "80"})
    assert shown.exit_code == 0, shown.output
    configuration = json.loads(shown.output[shown.output.index("{") : shown.output.rindex("}") + 1])
    [server] = configuration["mcpServers"].values()
    assert server["command"] == "agentrein" and server["args"][:2] == ["mcp", "proxy"]
    assert server["args"][server["args"].index("--") + 1 :] == ["npx", "-y", "@modelcontextprotocol/server-memory"]


def test_an_upstream_that_cannot_be_started_is_a_clear_error_and_the_proxy_exits(tmp_path: Path) -> None:
    database = ["--database-url", f"sqlite:///{tmp_path / 'agentrein.db'}"]
    missing = tmp_path / "no-such-server"
    done = subprocess.run(
        [str(AGENTREIN), "mcp", "proxy", *database, "--", str(missing)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "500"},
        timeout=60,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert "the upstream MCP server could not be started" in done.stderr and str(missing) in done.stderr
    assert "Traceback" not in done.stderr


# A connection of its own -------------------------------------------------------------------------------------


def test_a_host_that_disconnects_completes_its_session(tmp_path: Path) -> None:
    database_url = f"sqlite:///{tmp_path / 'agentrein.db'}"
    host = proxy(database_url, tmp_path, "--agent-id", "desktop", "--intent", "Keep my notes")
    try:
        assert not host.call("create_entities", entities("eve")).is_error
    finally:
        host.disconnect()
    with AgentRein(database_url) as agentrein:
        [summary] = agentrein.list_sessions()
        session = agentrein.get_session(summary.id)
    assert (session.agent_id, session.intent, session.status) == ("desktop", "Keep my notes", SessionStatus.COMPLETED)
    assert [a.status for a in session.actions] == [ActionStatus.SUCCESS]


def test_with_on_tool_error_record_a_tool_error_is_recorded_and_nothing_is_rolled_back(tmp_path: Path) -> None:
    database_url = f"sqlite:///{tmp_path / 'agentrein.db'}"
    host = proxy(database_url, tmp_path, "--name", "memory", "--on-tool-error", "record")
    try:
        assert not host.call("create_entities", entities("hal")).is_error
        failed = host.call("add_observations", {"observations": [{"entityName": "nobody", "contents": ["hi"]}]})
        graph = host.graph()
    finally:
        host.disconnect()
    assert failed.is_error and "nobody" in text_of(failed)
    assert names_in(graph) == {"hal"}
    with AgentRein(database_url) as agentrein:
        [summary] = agentrein.list_sessions()
        session = agentrein.get_session(summary.id)
    assert session.status == SessionStatus.COMPLETED
    assert [a.status for a in session.actions] == [ActionStatus.SUCCESS, ActionStatus.FAILED]


def test_resources_prompts_progress_logs_and_what_the_upstream_asks_of_the_host_pass_through(tmp_path: Path) -> None:
    asked: list[str] = []
    logged: list[Any] = []
    progress: list[str | None] = []

    async def sampling(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        asked.append(text_of_message(params.messages[0]))
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="yes"), model="host-model"
        )

    async def roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri="file:///home/ada")])

    async def log(params: types.LoggingMessageNotificationParams) -> None:
        logged.append(params.data)

    async def progressed(value: float, total: float | None, message: str | None) -> None:
        progress.append(message)

    server = tmp_path / "asking.py"
    server.write_text(textwrap.dedent(ASKING_SERVER))
    database_url = f"sqlite:///{tmp_path / 'agentrein.db'}"
    host = proxy(
        database_url,
        tmp_path,
        upstream=[sys.executable, str(server)],
        sampling_callback=sampling,
        list_roots_callback=roots,
        logging_callback=log,
    )
    try:
        instructions = host.client.instructions
        resources = host.run(host.client.list_resources())
        note = host.run(host.client.read_resource("note://today"))
        prompt = host.run(host.client.get_prompt("greet", {"name": "ada"}))
        answer = host.call("ask_host", {"question": "may I?"}, progress_callback=progressed)
    finally:
        host.disconnect()
    assert instructions == "Ask the host first."
    assert [str(r.uri) for r in resources.resources] == ["note://today"]
    assert [c.text for c in note.contents if isinstance(c, types.TextResourceContents)] == ["buy milk"]
    assert "ada" in text_of_message(prompt.messages[0])
    assert not answer.is_error and text_of(answer) == "yes under file:///home/ada"
    assert (asked, logged, progress) == (["may I?"], ["asking the host"], ["asking", "answered"])
    with AgentRein(database_url) as agentrein:
        [summary] = agentrein.list_sessions()
        [action] = agentrein.get_session(summary.id).actions
    assert (action.api_name, action.status) == ("asking.ask_host", ActionStatus.SUCCESS)


def test_an_upstream_reached_by_url_gets_the_headers_given(tmp_path: Path) -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    script = tmp_path / "remote.py"
    script.write_text(textwrap.dedent(HTTP_SERVER))
    remote = subprocess.Popen([sys.executable, str(script), str(port)], stderr=subprocess.DEVNULL)
    try:
        while remote.poll() is None:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        url = f"http://127.0.0.1:{port}/mcp"
        options = ["--upstream-url", url, "--upstream-header", "Authorization: Bearer t0ken"]
        host = proxy(f"sqlite:///{tmp_path / 'agentrein.db'}", tmp_path, *options)
        try:
            answer = host.call("whoami", {})
        finally:
            host.disconnect()
    finally:
        remote.terminate()
        remote.wait(10)
    assert not answer.is_error and text_of(answer) == "Bearer t0ken"


def test_a_proxy_on_an_agentrein_server_records_there_and_runs_the_undos_the_server_hands_back(
    server: RunningServer, tmp_path: Path
) -> None:
    tenant = server.tenant()
    host = proxy(None, tmp_path, "--url", tenant.url, "--api-key", tenant.key, "--name", "memory")
    try:
        assert not host.call("create_entities", entities("gus")).is_error
        failed = host.call("add_observations", {"observations": [{"entityName": "nobody", "contents": ["hi"]}]})
        graph = host.graph()
    finally:
        host.disconnect()
    assert failed.is_error
    assert names_in(graph) == set()  # the server handed the undo of create_entities to the proxy, which ran it
    with tenant.client() as agentrein:
        [summary] = agentrein.list_sessions()
        session = agentrein.get_session(summary.id)
    assert session.status == SessionStatus.ROLLED_BACK
    assert [a.api_name for a in session.actions] == ["memory.create_entities", "memory.add_observations"]


def unused_address() -> str:
    """An address on 127.0.0.1 where no AgentRein answers (a port bound, then freed)."""
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{unused.getsockname()[1]}"


def test_agentrein_out_of_reach_answers_a_proxy_that_runs_closed_before_the_upstream_sees_the_call(
    tmp_path: Path,
) -> None:
    nowhere = unused_address()
    host = proxy(None, tmp_path, "--url", nowhere, "--api-key", "ar_none", "--failure-mode", "closed")
    try:
        result = host.call("create_entities", entities("fay"))
    finally:
        host.disconnect()
    assert result.is_error
    assert "AgentRein could not be reached, and this proxy runs closed" in text_of(result)
    memory = tmp_path / "memory.jsonl"
    assert not memory.exists() or "fay" not in memory.read_text()  # the server's own file: nothing was made


def test_agentrein_out_of_reach_lets_a_proxy_that_runs_closed_pass_reads_which_are_never_recorded(
    tmp_path: Path,
) -> None:
    nowhere = unused_address()
    (tmp_path / "memory.jsonl").write_text(
        json.dumps({"type": "entity", "name": "kim", "entityType": "person", "observations": []}) + "\n"
    )
    host = proxy(None, tmp_path, "--url", nowhere, "--api-key", "ar_none", "--failure-mode", "closed")
    try:
        read = host.call("read_graph", {})  # READ by the built-in table and by its readOnlyHint
        written = host.call("create_entities", entities("lou"))
    finally:
        host.disconnect()
    assert not read.is_error, read
    assert "kim" in text_of(read)
    assert written.is_error and "this proxy runs closed" in text_of(written)


def test_agentrein_out_of_reach_lets_a_proxy_that_runs_open_make_the_call_and_journal_it(tmp_path: Path) -> None:
    nowhere = unused_address()
    journal = tmp_path / "journal.db"
    host = proxy(None, tmp_path, "--url", nowhere, "--api-key", "ar_none", env={"AGENTREIN_JOURNAL": str(journal)})
    try:
        result = host.call("create_entities", entities("ivy"))
        graph = host.graph()
    finally:
        host.disconnect()
    assert not result.is_error, result
    assert names_in(graph) == {"ivy"}
    with closing(sqlite3.connect(journal)) as outbox:  # the SDK's journal of what the server has yet to hear
        journaled = str(outbox.execute("SELECT * FROM outbox").fetchall())
    assert "memory-server.create_entities" in journaled  # no --name: the server's own name


def test_an_upstream_that_crashes_mid_call_answers_the_host_an_error_and_says_why_on_stderr_only(
    tmp_path: Path,
) -> None:
    server = tmp_path / "crashing.py"
    server.write_text(textwrap.dedent(CRASHING_SERVER))
    database_url = f"sqlite:///{tmp_path / 'agentrein.db'}"
    host = proxy(database_url, tmp_path, "--name", "crashing", upstream=[sys.executable, str(server)])
    try:
        result = host.call("explode", {"target": "everything"})
        with pytest.raises(MCPError) as next_request:  # the next request fails at once too, saying why
            host.run(host.client.list_tools(), timeout=30)
    finally:
        host.disconnect()
    assert result.is_error
    assert "the upstream MCP server closed its connection" in text_of(result)
    assert "the upstream MCP server closed its connection" in str(next_request.value)
    said = host.errlog.read_text()
    assert "closed its connection" in said and "Traceback" not in said


class RawHost:
    """A host as a process sees it: the proxy launched with pipes, JSON-RPC lines written and read by hand, so
    that the test holds the proxy's process (to signal it) while its stdin stays open."""

    def __init__(self, database_url: str, tmp_path: Path, *options: str, upstream: Sequence[str] = ()) -> None:
        env = {**os.environ, "MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")}
        upstream = upstream or ["node", str(MEMORY_SERVER)]
        args = ["mcp", "proxy", "--database-url", database_url, *options, "--", *upstream]
        self.process = subprocess.Popen(
            [str(AGENTREIN), *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        )
        self.sent = 0

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.sent += 1
        self.notify(method, params, id=self.sent)
        assert self.process.stdout is not None
        while True:
            answer: dict[str, Any] = json.loads(self.process.stdout.readline())
            if answer.get("id") == self.sent:
                return answer

    def notify(self, method: str, params: dict[str, Any], **fields: Any) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"jsonrpc": "2.0", "method": method, "params": params, **fields}).encode())
        self.process.stdin.write(b"\n")
        self.process.stdin.flush()

    def initialize(self) -> None:
        hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "desktop", "version": "1"}}
        assert "result" in self.request("initialize", hello)
        self.notify("notifications/initialized", {})

    def stop(self, stop: signal.Signals, timeout: float = 60) -> str:
        """Send ``stop``; once the proxy has exited (status 0), what it said on stderr."""
        self.process.send_signal(stop)  # its stdin still open, as a host that stops its servers leaves it
        assert self.process.wait(timeout) == 0
        assert self.process.stderr is not None
        return self.process.stderr.read().decode()

    def close_input(self, timeout: float = 60) -> str:
        """Close the proxy's stdin, as MCP's stdio shutdown begins; once it has exited (status 0), what it said."""
        assert self.process.stdin is not None and self.process.stderr is not None
        self.process.stdin.close()
        assert self.process.wait(timeout) == 0
        return self.process.stderr.read().decode()

    def children(self) -> set[int]:
        tasks = Path(f"/proc/{self.process.pid}/task")
        return {int(pid) for task in tasks.iterdir() for pid in (task / "children").read_text().split()}


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_host_that_stops_the_proxy_with_a_signal_completes_its_session_and_the_upstream_is_closed(
    tmp_path: Path, stop: signal.Signals
) -> None:
    database_url = f"sqlite:///{tmp_path / 'agentrein.db'}"
    host = RawHost(database_url, tmp_path)
    try:
        host.initialize()
        called = host.request("tools/call", {"name": "create_entities", "arguments": entities("ned")})
        assert called["result"]["isError"] is False
        (upstream,) = host.children()
        said = host.stop(stop)
    finally:
        ended(host)
    assert not Path(f"/proc/{upstream}").exists() or "Z" in Path(f"/proc/{upstream}/stat").read_text().split()[2]
    assert stop.name in said
    with AgentRein(database_url) as agentrein:
        [summary] = agentrein.list_sessions()
        session = agentrein.get_session(summary.id)
    assert (session.agent_id, session.status) == ("desktop", SessionStatus.COMPLETED)
    assert [a.status for a in session.actions] == [ActionStatus.SUCCESS]


@pytest.mark.parametrize("how", ["SIGTERM", "stdin closed"])
def test_a_host_that_stops_the_proxy_while_a_call_runs_lets_it_finish_and_its_outcome_is_recorded(
    tmp_path: Path, how: str
) -> None:
    server, started = tmp_path / "slow.py", tmp_path / "started"
    server.write_text(textwrap.dedent(SLOW_SERVER))
    database_url = f"sqlite:///{tmp_path / 'agentrein.db'}"
    host = RawHost(database_url, tmp_path, "--name", "slow", upstream=[sys.executable, str(server), str(started)])
    try:
        host.initialize()
        host.notify("tools/call", {"name": "create_note", "arguments": {"text": "buy milk"}}, id=99)
        assert eventually(started.exists, bool, timeout=60)  # the upstream runs it
        said = host.stop(signal.SIGTERM) if how == "SIGTERM" else host.close_input()
    finally:
        ended(host)
    with AgentRein(database_url) as agentrein:
        [summary] = agentrein.list_sessions()
        session = agentrein.get_session(summary.id)
    # recorded as it ended, not left unconfirmed (CLEARED), which a rollback could never undo
    assert [(a.api_name, a.status) for a in session.actions] == [("slow.create_note", ActionStatus.SUCCESS)]
    assert session.status is SessionStatus.COMPLETED
    assert "once the 1 tool call(s) under way finish" in said and "Traceback" not in said


@pytest.mark.parametrize("how", ["SIGTERM", "stdin closed"])
def test_a_host_that_stops_the_proxy_while_a_call_waits_for_a_reviewer_has_the_request_withdrawn_at_once(
    tmp_path: Path, how: str
) -> None:
    database_url = f"sqlite:///{tmp_path / 'agentrein.db'}"
    host = RawHost(database_url, tmp_path, "--requires-approval", "create_*")
    try:
        host.initialize()
        host.notify("tools/call", {"name": "create_entities", "arguments": entities("liz")}, id=99)
        with AgentRein(database_url) as agentrein:
            assert eventually(lambda: agentrein.list_approvals(ApprovalStatus.PENDING), bool, timeout=60)
        timeout = FINISH_SECONDS / 2  # not kept for the calls that run
        said = host.stop(signal.SIGTERM, timeout=timeout) if how == "SIGTERM" else host.close_input(timeout=timeout)
    finally:
        ended(host)
    assert "is REJECTED: the held memory-server.create_entities does not run" in said
    assert "under way finish" not in said and "its outcome is not recorded" not in said  # it did not run
    if how == "stdin closed":  # the proxy still answers the call: it was not run
        assert "create_entities was held for a reviewer when the proxy stopped: it was not run" in said
    assert_withdrawn(database_url)


def test_a_call_held_for_a_reviewer_only_after_the_proxy_was_stopped_is_withdrawn_as_it_is_held(tmp_path: Path) -> None:
    # Let finish, it waited for a reviewer for the rest of the grace: approved then, it would start a call the proxy
    # could cut off, its outcome never recorded.
    database_url = f"sqlite:///{tmp_path / 'agentrein.db'}"
    host = RawHost(database_url, tmp_path, "--requires-approval", "create_*")
    try:
        host.initialize()
        with closing(sqlite3.connect(tmp_path / "agentrein.db", isolation_level=None)) as writer:
            writer.execute("BEGIN IMMEDIATE")  # the call's record waits for the database meanwhile
            host.notify("tools/call", {"name": "create_entities", "arguments": entities("kim")}, id=99)
            time.sleep(1)
            host.process.send_signal(signal.SIGTERM)
            time.sleep(0.5)
            writer.execute("ROLLBACK")
        assert host.process.wait(FINISH_SECONDS / 2) == 0  # not kept for the rest of the grace
        assert host.process.stderr is not None
        said = host.process.stderr.read().decode()
    finally:
        ended(host)
    assert "once the 1 tool call(s) under way finish" in said  # not yet held when it was stopped
    assert "create_entities was held for a reviewer when the proxy stopped: it was not run" in said
    assert_withdrawn(database_url)


def assert_withdrawn(database_url: str) -> None:
    """The one held call's request was withdrawn, as the agent stopped waiting, and the call did not run."""
    with AgentRein(database_url) as agentrein:
        [approval] = agentrein.list_approvals()
        [summary] = agentrein.list_sessions()
        session = agentrein.get_session(summary.id)
    assert approval.status is not ApprovalStatus.PENDING and "the agent stopped waiting" in (approval.reason or "")
    assert [a.status for a in session.actions] == [ActionStatus.FAILED]


def ended(host: RawHost) -> None:
    """The proxy's process, killed if a test left it running."""
    if host.process.poll() is None:
        host.process.kill()
        host.process.wait(10)

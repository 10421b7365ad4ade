"""``agentrein mcp proxy``: a stdio MCP server that a host launches instead of the server it means, which starts
that server (the upstream: a command, or a streamable-HTTP URL) and forwards everything both ways, unchanged;
each ``tools/call`` alone goes through AgentRein's guard (the ``mcp`` connector's wrapped client).

The proxy speaks the handshake era (``initialize``) on both sides, so that what the upstream asks of the host
(sampling, elicitation, roots) can travel as requests, as the reference servers expect. One AgentRein session
per host connection, opened at the first ``tools/call`` and completed when the host disconnects cleanly (or stops
the proxy with SIGTERM or SIGINT, as hosts do); after a rollback has ended it, the next call opens a new one.
Refusals (a block, a rejection, an expiry, AgentRein unreachable in ``closed`` mode) answer an ``isError`` result
in words a model can act on: nothing raises across the host. stdout is the protocol's channel: every word this
process says goes to stderr.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
import os
import signal
import stat
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, closing, nullcontext
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, cast

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.server.lowlevel import Server
from mcp.server.models import InitializationOptions
from mcp.server.runner import serve_loop
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from agentrein_core.errors import (
    AgentReinError,
    AgentReinUnavailableError,
    ApprovalRejectedError,
    ApprovalTimeoutError,
    InvalidTransitionError,
    PolicyBlockedError,
)

if TYPE_CHECKING:
    from mcp.client.context import ClientRequestContext
    from mcp.client.session import IncomingMessage
    from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
    from mcp.server.session import ServerSession
    from mcp.shared.dispatcher import ProgressFnT

    from agentrein import AsyncAgentRein, SessionInfo

#: What the proxy itself says (on stderr); not under "agentrein", whose warnings are news for a held call.
log = logging.getLogger("agentrein_cli.mcp_proxy")

#: How often a held call tells the host it is still waiting (MCP progress), so that the host does not time out.
HEARTBEAT_SECONDS = 5.0
#: How long the tool calls under way when the host's connection ends (it closes stdin, or stops the proxy with a
#: signal) may take to finish: cut off, a call's outcome would never be recorded (it stays unconfirmed, and a
#: rollback cannot undo it).
FINISH_SECONDS = 10.0
#: What the host is told once the upstream's connection has closed under the proxy.
GONE = "the upstream MCP server closed its connection (it exited or crashed): restart this MCP server"
#: The environment variables of AgentRein itself, which the upstream (another program) is not given.
OWN_ENVIRONMENT_PREFIX = "AGENTREIN_"


@dataclass(frozen=True)
class ProxyOptions:
    """What ``agentrein mcp proxy`` was told (its options, as the command line spells them)."""

    upstream_command: list[str] = field(default_factory=list)
    upstream_url: str | None = None
    upstream_headers: dict[str, str] = field(default_factory=dict)
    name: str | None = None
    agent_id: str | None = None
    intent: str = ""
    undo: str | None = None
    database_url: str | None = None
    url: str | None = None
    api_key: str | None = None
    requires_approval: list[str] = field(default_factory=list)
    retryable: list[str] = field(default_factory=list)
    on_tool_error: str = "rollback"
    failure_mode: str = "open"


@asynccontextmanager
async def upstream_transport(options: ProxyOptions) -> AsyncIterator[Any]:
    """How to reach the upstream: its command (with this process's environment, less AgentRein's own, so that
    the credentials a host configures for the server reach it), or its URL with the headers given (over an
    HTTP client closed with the proxy)."""
    if options.upstream_url:
        import httpx2

        timeout = httpx2.Timeout(30, read=300)  # the mcp SDK's own: a server may hold a response stream open
        async with httpx2.AsyncClient(headers=options.upstream_headers, timeout=timeout) as http:
            yield streamable_http_client(options.upstream_url, http_client=http)
        return
    command, *args = options.upstream_command
    env = {k: v for k, v in os.environ.items() if not k.startswith(OWN_ENVIRONMENT_PREFIX)}
    yield StdioServerParameters(command=command, args=args, env=env)


def header(text: str) -> tuple[str, str]:
    """``"Name: value"`` as a header's name and value."""
    name, colon, value = text.partition(":")
    if not colon or not name.strip():
        raise ValueError(f"--upstream-header {text!r} is not 'Name: value'")
    return name.strip(), value.strip()


# The host ----------------------------------------------------------------------------------------------------


class Host:
    """The host's side of the connection, for what the upstream sends it: the last request's session (whose
    connection-wide channel carries requests and notifications to the host, on stdio at any time)."""

    def __init__(self) -> None:
        self.session: ServerSession | None = None

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """A middleware: remembers the session of every message the host sends; says so, in words, when the
        upstream has gone (rather than "Connection closed", which a host would take for its own connection)."""
        self.session = ctx.session
        try:
            return await call_next(ctx)
        except MCPError as exc:
            if exc.code != types.CONNECTION_CLOSED:
                raise
            log.warning("%s (%s)", GONE, ctx.method)
            raise MCPError(code=types.INTERNAL_ERROR, message=GONE) from None

    async def _ask(self, request: Any, result_type: type[Any]) -> Any:
        if self.session is None:
            return types.ErrorData(code=types.INTERNAL_ERROR, message="no host is connected to the proxy yet")
        try:
            return await self.session.send_request(request, result_type)
        except MCPError as exc:
            return exc.error

    async def sampling(self, context: ClientRequestContext, params: types.CreateMessageRequestParams) -> Any:
        result_type = types.CreateMessageResultWithTools if params.tools else types.CreateMessageResult
        return await self._ask(types.CreateMessageRequest(params=params), result_type)

    async def elicitation(self, context: ClientRequestContext, params: types.ElicitRequestParams) -> Any:
        return await self._ask(types.ElicitRequest(params=params), types.ElicitResult)

    async def roots(self, context: ClientRequestContext) -> Any:
        return await self._ask(types.ListRootsRequest(), types.ListRootsResult)

    async def notification(self, message: IncomingMessage) -> None:
        """An upstream notification, passed on (progress excepted: each call forwards its own, under the host's
        token); a transport failure, said on stderr."""
        if isinstance(message, Exception):
            log.warning("the upstream MCP server's connection failed: %s", message)
        elif not isinstance(message, types.ProgressNotification) and self.session is not None:
            await self.session.send_notification(message)


# Held calls --------------------------------------------------------------------------------------------------


@dataclass
class Waiting:
    """What AgentRein said (logged) during one tools/call, for the host's progress notifications, and whether
    the call is held for a reviewer now. The guard logs from a worker thread, so the news is handed to the loop."""

    loop: asyncio.AbstractEventLoop
    notice: str | None = None
    held_for: str | None = None
    news: asyncio.Event = field(default_factory=asyncio.Event)
    #: Given up by a stopping proxy while held (:meth:`CallUnderWay.finish_within`): its request is withdrawn.
    given_up: bool = False
    #: Set by a stopping proxy that lets the call finish: how to give it up should it be held from then on.
    give_up_if_held: Callable[[], None] | None = None

    def tell(self, record: logging.LogRecord) -> None:
        from agentrein._guard import HELD_FOR

        self.notice = record.getMessage()
        self.held_for = getattr(record, HELD_FOR, self.held_for)
        self.loop.call_soon_threadsafe(self._told)

    def _told(self) -> None:
        self.news.set()
        if self.held_for is not None and self.give_up_if_held is not None:
            self.give_up_if_held()


_waiting: contextvars.ContextVar[Waiting | None] = contextvars.ContextVar("agentrein_mcp_proxy_waiting", default=None)


class Notices(logging.Handler):
    """Passes what AgentRein logs during a call (that it holds the call for approval, and how to decide it;
    the decision) to that call's :class:`Waiting`; the worker threads the guard runs in copy the context."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        waiting = _waiting.get()
        if waiting is not None:
            waiting.tell(record)


class CallProgress:
    """The progress notifications of one host call: AgentRein's notices while it waits (sent at once, then every
    :data:`HEARTBEAT_SECONDS`), then the upstream's own, shifted past them so that progress only grows."""

    def __init__(self, session: ServerSession, token: str | int) -> None:
        self.session = session
        self.token = token
        self.sent = 0

    async def upstream(self, progress: float, total: float | None, message: str | None) -> None:
        shifted_total = total + self.sent if total is not None else None
        await self.session.send_progress_notification(self.token, progress + self.sent, shifted_total, message)

    async def heartbeat(self, waiting: Waiting) -> None:
        while True:
            if waiting.notice is None:
                await waiting.news.wait()
            else:
                with anyio.move_on_after(HEARTBEAT_SECONDS):
                    await waiting.news.wait()
            waiting.news.clear()
            self.sent += 1
            await self.session.send_progress_notification(self.token, self.sent, None, waiting.notice)


@dataclass(frozen=True, eq=False)  # each call is itself, in a set
class CallUnderWay:
    """A host's tools/call being answered: its scope, and what AgentRein said during it."""

    scope: anyio.CancelScope
    waiting: Waiting

    def finish_within(self, seconds: float) -> None:
        """The proxy is stopping: a call held for a reviewer is given up at once (its request is withdrawn:
        nobody will run it); any other may finish, within ``seconds``, so that its outcome is recorded. One held
        after this is given up as it is held: a reviewer approving it within ``seconds`` would start a call that
        could then be cut off, its outcome never recorded."""
        if self.waiting.held_for is not None:
            self._give_up()
            return
        self.waiting.give_up_if_held = self._give_up
        self.scope.shield = True
        self.scope.deadline = min(self.scope.deadline, anyio.current_time() + seconds)

    def _give_up(self) -> None:
        self.waiting.given_up = True
        self.scope.cancel()


# Tool calls through the guard --------------------------------------------------------------------------------


def refused(text: str) -> types.CallToolResult:
    """An ``isError`` result that says why the call was not made."""
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def refusal(exc: AgentReinError, tool: str) -> str:
    """Why AgentRein did not let ``tool`` run, in words a model can act on."""
    if isinstance(exc, PolicyBlockedError):
        why = f"blocked by policy {exc.policy_name!r}"
    elif isinstance(exc, ApprovalRejectedError):
        why = f"rejected by a reviewer: {exc.reason}" if exc.reason else "rejected by a reviewer"
    elif isinstance(exc, ApprovalTimeoutError):
        why = "the approval request expired before anyone decided it"
    elif isinstance(exc, AgentReinUnavailableError):
        why = "AgentRein could not be reached, and this proxy runs closed"
    else:
        why = f"AgentRein refused it ({exc})"
    return f"The tool {tool} was not run: {why}. Do not retry it unchanged."


@dataclass(frozen=True)
class Guarded:
    """One AgentRein session of the host's, and the upstream client wrapped in it."""

    session: SessionInfo
    client: Client


class HostSession:
    """This host connection's AgentRein session and the upstream client wrapped in it: opened at the first tool
    call, opened anew after a rollback ended it."""

    def __init__(self, upstream: Client, options: ProxyOptions) -> None:
        self.upstream = upstream
        self.options = options
        self.current: Guarded | None = None
        self._agentrein: AsyncAgentRein | None = None
        self._opening = anyio.Lock()

    async def call(
        self, params: types.CallToolRequestParams, agent_id: str, progress: ProgressFnT | None
    ) -> types.CallToolResult:
        try:
            try:
                guarded = await self._guarded(agent_id)
            except AgentReinUnavailableError:  # closed mode: no session could be opened
                if not await self._reads(params):
                    raise
                return await self._send(self.upstream, params, progress)  # a read is never recorded: it passes
            try:
                return await self._send(guarded.client, params, progress)
            except InvalidTransitionError:
                if not await self._ended(guarded.session):
                    raise
                # a rollback ended the session: the call was refused before it ran, so it runs in a new one
                return await self._send((await self._guarded(agent_id, ended=guarded)).client, params, progress)
        except AgentReinError as exc:
            log.warning("AgentRein did not run %s: %s", params.name, exc)
            return refused(refusal(exc, params.name))
        except Exception as exc:
            # The connector's McpToolError (the tool answered isError, and the session rolls back) carries the
            # upstream's own answer, which the host gets as it is; found by its result, as the CLI imports no
            # connector (DESIGN §2).
            result = getattr(exc, "result", None)
            if isinstance(result, types.CallToolResult):
                log.warning("%s", exc)
                return result
            raise

    async def _send(
        self, client: Client, params: types.CallToolRequestParams, progress: ProgressFnT | None
    ) -> types.CallToolResult:
        # the host's progress token stays here: the upstream gets its own (see CallProgress)
        meta = {k: v for k, v in (params.meta or {}).items() if k != "progress_token"}
        return await client.call_tool(
            params.name, params.arguments, progress_callback=progress, meta=cast(types.RequestParamsMeta, meta) or None
        )

    async def _reads(self, params: types.CallToolRequestParams) -> bool:
        """Whether the mcp connector takes the tool for a read, which passes unrecorded: classified as a wrapped
        client would (the undo table, then the tool's annotations, then its name), through the plugin contract,
        as the CLI imports no connector (DESIGN §2)."""
        from agentrein_core.plugins import installed_connectors

        connector = installed_connectors().get("mcp")
        binding = connector.bind(self.upstream, {"server": self.options.name, "undo": self.options.undo})
        prepared = connector.prepare(binding, ("call_tool",), (params.name, params.arguments), {})
        return (await prepared if inspect.isawaitable(prepared) else prepared) is None

    @property
    def agentrein(self) -> AsyncAgentRein:
        """AgentRein, reached at the first tool call (a host that only lists tools never opens the database)."""
        if self._agentrein is None:
            from agentrein import AsyncAgentRein

            options = self.options
            if options.url:
                self._agentrein = AsyncAgentRein(base_url=options.url, api_key=options.api_key)
            else:
                self._agentrein = AsyncAgentRein(options.database_url)
        return self._agentrein

    async def _guarded(self, agent_id: str, *, ended: Guarded | None = None) -> Guarded:
        """The current session's client; a new session's when there is none yet, or when ``ended`` (whose
        session a rollback ended) is still the current one (calls that find it ended together open one)."""
        async with self._opening:
            if self.current is None or self.current is ended:
                options = self.options
                session = await self.agentrein.new_session(
                    agent_id=agent_id, intent=options.intent, failure_mode=options.failure_mode
                )
                log.warning("AgentRein session %s records this host's tool calls", session.id)
                client = self.agentrein.wrap(
                    self.upstream,
                    session,
                    connector="mcp",
                    server=options.name,
                    requires_approval=options.requires_approval,
                    retryable=options.retryable,
                    undo=options.undo,
                    on_tool_error=options.on_tool_error,
                    failure_mode=options.failure_mode,
                )
                self.current = Guarded(session, client)
            return self.current

    async def _ended(self, session: SessionInfo) -> bool:
        from agentrein import SessionStatus

        return (await self.agentrein.get_session(session)).status != SessionStatus.ACTIVE

    async def complete(self) -> None:
        """The host disconnected cleanly: its session is completed (unless a rollback ended it)."""
        if self.current is None:
            return
        session = self.current.session
        try:
            if not await self._ended(session):
                await self.agentrein.complete_session(session)
                log.warning("AgentRein session %s completed: the host disconnected", session.id)
        except AgentReinError as exc:
            log.warning("AgentRein session %s could not be completed: %s", session.id, exc)

    async def close(self) -> None:
        if self._agentrein is not None:
            await self._agentrein.close()


# The server the host sees ------------------------------------------------------------------------------------


def proxy_server(
    upstream: Client, recording: HostSession, host: Host, options: ProxyOptions, under_way: set[CallUnderWay]
) -> Server[Any]:
    """A low-level MCP server whose every request is answered by the upstream: tools/call through the guard,
    each kept in ``under_way`` while it is answered."""
    session = upstream.session

    async def call_tool(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> Any:
        waiting = Waiting(asyncio.get_running_loop())
        watched = _waiting.set(waiting)
        with anyio.CancelScope() as scope:
            call = CallUnderWay(scope, waiting)
            under_way.add(call)
            try:
                return await _answered(ctx, params, waiting)
            finally:
                under_way.discard(call)
                _waiting.reset(watched)
        # The scope's own cancellation, by a stopping proxy (CallUnderWay.finish_within): a held call given up, or
        # one cut off when its time ran out. Any other (the host's own) passes on as raised.
        if waiting.given_up:
            log.warning("%s was held for a reviewer when the proxy stopped: it was not run", params.name)
            return refused(f"The tool {params.name} was not run: the proxy was stopped while it waited for a reviewer.")
        log.warning("stopped before %s had finished: its outcome is not recorded (it stays unconfirmed)", params.name)
        return refused(f"The tool {params.name} may or may not have run: the proxy was stopped while it ran.")

    async def _answered(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams, waiting: Waiting
    ) -> Any:
        client = ctx.session.client_params
        agent_id = options.agent_id or (client.client_info.name if client else None) or "mcp-host"
        token = (params.meta or {}).get("progress_token")
        if token is None:
            return await _upstream_errors(recording.call(params, agent_id, None))
        progress = CallProgress(ctx.session, token)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(progress.heartbeat, waiting)
            try:
                return await _upstream_errors(recording.call(params, agent_id, progress.upstream))
            finally:
                tasks.cancel_scope.cancel()

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams) -> types.ListToolsResult:
        return await session.list_tools(params=params)

    async def list_resources(ctx: Any, params: types.PaginatedRequestParams) -> types.ListResourcesResult:
        return await session.list_resources(params=params)

    async def list_templates(ctx: Any, params: types.PaginatedRequestParams) -> types.ListResourceTemplatesResult:
        return await session.list_resource_templates(params=params)

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        return await session.read_resource(str(params.uri))

    async def subscribe(ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
        return await session.subscribe_resource(str(params.uri))

    async def unsubscribe(ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        return await session.unsubscribe_resource(str(params.uri))

    async def list_prompts(ctx: Any, params: types.PaginatedRequestParams) -> types.ListPromptsResult:
        return await session.list_prompts(params=params)

    async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        return await session.get_prompt(params.name, params.arguments)

    async def complete(ctx: Any, params: types.CompleteRequestParams) -> types.CompleteResult:
        context = params.context.arguments if params.context else None
        return await session.complete(params.ref, params.argument.model_dump(), context)

    async def set_level(ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
        return await session.set_logging_level(params.level)

    async def roots_changed(ctx: Any, params: types.NotificationParams) -> None:
        await session.send_roots_list_changed()

    async def no_discovery(ctx: Any, params: types.RequestParams) -> None:
        # The handshake era on both sides: a host that probes is answered as by a server that predates discovery.
        raise MCPError(code=types.METHOD_NOT_FOUND, message="Method not found", data="server/discover")

    server: Server[Any] = Server(options.name or "agentrein-mcp-proxy", on_call_tool=call_tool)
    handlers: dict[str, tuple[type[Any], Any]] = {
        "server/discover": (types.RequestParams, no_discovery),
        "tools/list": (types.PaginatedRequestParams, list_tools),
        "resources/list": (types.PaginatedRequestParams, list_resources),
        "resources/templates/list": (types.PaginatedRequestParams, list_templates),
        "resources/read": (types.ReadResourceRequestParams, read_resource),
        "resources/subscribe": (types.SubscribeRequestParams, subscribe),
        "resources/unsubscribe": (types.UnsubscribeRequestParams, unsubscribe),
        "prompts/list": (types.PaginatedRequestParams, list_prompts),
        "prompts/get": (types.GetPromptRequestParams, get_prompt),
        "completion/complete": (types.CompleteRequestParams, complete),
        "logging/setLevel": (types.SetLevelRequestParams, set_level),
    }
    for method, (params_type, handler) in handlers.items():
        server.add_request_handler(method, params_type, handler)
    server.add_notification_handler("notifications/roots/list_changed", types.NotificationParams, roots_changed)
    server.middleware.insert(0, host)
    return server


async def _upstream_errors(call: Awaitable[types.CallToolResult]) -> types.CallToolResult:
    """The call's result; the upstream's own JSON-RPC errors pass to the host as they are, and a failure of the
    upstream itself (it crashed, its connection broke) is an ``isError`` result that says so."""
    try:
        return await call
    except MCPError as exc:
        if exc.code != types.CONNECTION_CLOSED:
            raise
        log.warning("%s during a tool call", GONE)
        return refused(f"The tool may or may not have run: {GONE}.")
    except Exception as exc:
        log.warning("the upstream MCP server failed during a tool call: %r", exc)
        return refused(f"The upstream MCP server failed during this call ({type(exc).__name__}: {exc}).")


def initialization(upstream: Client, options: ProxyOptions) -> InitializationOptions:
    """What the host is told at ``initialize``: the upstream's own identity, capabilities and instructions (its
    name too: ``--name`` names its calls in AgentRein, not the server the host sees)."""
    info = upstream.server_info
    return InitializationOptions(
        server_name=info.name if info else (options.name or "agentrein-mcp-proxy"),
        server_version=info.version if info else "",
        title=info.title if info else None,
        description=info.description if info else None,
        website_url=info.website_url if info else None,
        icons=info.icons if info else None,
        capabilities=upstream.server_capabilities,
        instructions=upstream.instructions,
    )


@asynccontextmanager
async def connected(options: ProxyOptions, host: Host) -> AsyncIterator[Client]:
    """The upstream, started and initialised (handshake era), whatever it asks of the host sent to the host."""
    async with upstream_transport(options) as transport:
        client = Client(
            transport,
            mode="legacy",
            sampling_callback=host.sampling,
            elicitation_callback=host.elicitation,
            list_roots_callback=host.roots,
            message_handler=host.notification,
            cache=None,
        )
        async with client:
            yield client


async def run(options: ProxyOptions) -> None:
    """Serve one host on stdin/stdout until it disconnects."""
    notices = Notices()
    logging.getLogger("agentrein").addHandler(notices)
    host = Host()
    started = False
    try:
        async with connected(options, host) as upstream:
            started = True
            recording = HostSession(upstream, options)
            under_way: set[CallUnderWay] = set()
            server = proxy_server(upstream, recording, host, options, under_way)
            try:
                # Windows ends a process with no signal it could catch (and anyio has no receiver there)
                posix = os.name == "posix"
                stdin_lines = StdinLines(sys.stdin.fileno(), partial(_host_closed_stdin, under_way)) if posix else None
                with closing(stdin_lines) if stdin_lines else nullcontext() as stdin:
                    async with anyio.create_task_group() as serving:
                        if posix:
                            serving.start_soon(_stop_on_signal, serving.cancel_scope, under_way)
                        async with stdio_server(stdin=cast("anyio.AsyncFile[str] | None", stdin)) as (read, write):
                            init = initialization(upstream, options)
                            await serve_loop(server, read, write, lifespan_state={}, init_options=init)
                        serving.cancel_scope.cancel()
                await recording.complete()
            finally:
                await recording.close()
    except Exception as exc:
        if started:
            raise
        reasons = "; ".join(f"{type(e).__name__}: {e}" for e in _leaves(exc))
        raise AgentReinError(f"the upstream MCP server could not be started ({reasons})") from None
    finally:
        logging.getLogger("agentrein").removeHandler(notices)


async def _stop_on_signal(serving: anyio.CancelScope, under_way: set[CallUnderWay]) -> None:
    """SIGTERM or SIGINT (hosts stop their servers so) ends the host's connection as a clean disconnect does: the
    serving is cancelled, once the tool calls under way have finished (:func:`let_finish`), then the session is
    completed and the upstream closed. A second signal ends the process as the signal does by default."""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for number in signals:
            said = f"stopped by {signal.Signals(number).name}: the host's connection ends as a disconnect"
            running = let_finish(under_way)
            if running:
                said += f", once the {running} tool call(s) under way finish (within {FINISH_SECONDS:g} s)"
            log.warning("%s", said)
            serving.cancel()
            return


def _host_closed_stdin(under_way: set[CallUnderWay]) -> None:
    running = let_finish(under_way)
    if running:
        log.warning(
            "the host closed its connection: the proxy ends once the %d tool call(s) under way finish (within %g s)",
            running,
            FINISH_SECONDS,
        )


def let_finish(under_way: set[CallUnderWay]) -> int:
    """The host's connection ends with tool calls under way: each may finish within :data:`FINISH_SECONDS`, so
    that its outcome is recorded (the host will not read the answer); those held for a reviewer are withdrawn at
    once. How many run on."""
    running = sum(call.waiting.held_for is None for call in under_way)
    for call in list(under_way):
        call.finish_within(FINISH_SECONDS)
    return running


class StdinLines:
    """The host's lines on stdin, read as the loop finds them ready. The ``mcp`` SDK reads stdin in a worker
    thread, which a cancellation waits for until the host closes stdin: a signal could not end the serving.
    ``at_end`` runs when the host closes stdin (MCP's stdio shutdown), before the SDK cancels the requests under
    way."""

    def __init__(self, fd: int, at_end: Callable[[], None]) -> None:
        self.fd = fd
        self.at_end = at_end
        self.buffer = b""
        self.waits = not stat.S_ISREG(os.fstat(fd).st_mode)  # a file is always ready, and the loop cannot watch it
        self.was_blocking = os.get_blocking(fd)
        os.set_blocking(fd, False)

    def close(self) -> None:
        """The descriptor as it was: it may be a terminal the shell reads next."""
        os.set_blocking(self.fd, self.was_blocking)

    def __aiter__(self) -> StdinLines:
        return self

    async def __anext__(self) -> str:
        while b"\n" not in self.buffer:
            if self.waits:
                await anyio.wait_readable(self.fd)
            try:
                chunk = os.read(self.fd, 65536)
            except BlockingIOError:  # another reader of the descriptor was first
                continue
            if not chunk:  # the host closed stdin: its last line, if unterminated, then the end
                if not self.buffer:
                    self.at_end()
                    raise StopAsyncIteration
                chunk = b"\n"
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.decode("utf-8", errors="replace") + "\n"


def _leaves(exc: BaseException) -> list[BaseException]:
    """The errors an exception group (anyio's task groups raise them) holds, else the error itself."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def serve(options: ProxyOptions) -> None:
    """Run the proxy; what it says goes to stderr."""
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="agentrein mcp proxy: %(message)s")
    anyio.run(run, options)

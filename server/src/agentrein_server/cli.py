"""The ``agentrein`` command line (typer + rich).

The commands that read and decide work on a server (``--url`` and ``--api-key``, or ``$AGENTREIN_URL`` and
``$AGENTREIN_API_KEY``; the key decides the organisation) or, without one, directly on a database
(``--database-url`` or ``$AGENTREIN_DATABASE_URL``, in the organisation ``--org``).
"""

from __future__ import annotations

import functools
import getpass
import inspect
import json
import secrets
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import quote

import httpx
import typer
from attrs import evolve, frozen
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from agentrein import AgentRein, ApprovalInfo
from agentrein.remote import API_KEY_ENV, URL_ENV
from agentrein_core.converter import from_wire, json_object
from agentrein_core.engine import DEFAULT_ORGANISATION, Engine
from agentrein_core.errors import (
    AgentReinError,
    AgentReinUnavailableError,
    InvalidTransitionError,
    NotFoundError,
    RollbackRefusedError,
    ValidationError,
)
from agentrein_core.model import JSON, Action, ConnectorConfig, Rollback
from agentrein_core.rollback import chain as undo_chain
from agentrein_core.rollback import is_through
from agentrein_core.rules import UNDOABLE
from agentrein_core.statuses import (
    ApprovalPurpose,
    ApprovalStatus,
    Plan,
    PolicyEffect,
    Role,
    RollbackStatus,
    UndoStatus,
    UserRole,
)
from agentrein_core.store import Store
from agentrein_core.views import SessionInfo

if TYPE_CHECKING:
    from agentrein_server.services import Services

app = typer.Typer(help="AgentRein: a safety net for AI agents that call real APIs.", no_args_is_help=True)
db = typer.Typer(help="The database AgentRein keeps its records in.", no_args_is_help=True)
sessions = typer.Typer(help="Sessions and their actions.", no_args_is_help=True)
approvals = typer.Typer(help="Approval requests: list them and decide them.", no_args_is_help=True)
policies = typer.Typer(help="The organisation's policies: ALLOW < REQUIRE_APPROVAL < BLOCK.", no_args_is_help=True)
connectors = typer.Typer(help="Connector plugins, and which may run inverses for rollbacks.", no_args_is_help=True)
orgs = typer.Typer(help="Organisations (run on the server's database).", no_args_is_help=True)
keys = typer.Typer(help="API keys (run on the server's database; keys are shown once).", no_args_is_help=True)
users = typer.Typer(help="Dashboard users (run on the server's database).", no_args_is_help=True)
app.add_typer(db, name="db")
app.add_typer(sessions, name="sessions")
app.add_typer(approvals, name="approvals")
app.add_typer(policies, name="policies")
app.add_typer(connectors, name="connectors")
app.add_typer(orgs, name="orgs")
app.add_typer(keys, name="keys")
app.add_typer(users, name="users")
console = Console()
#: The dashboard admin a fresh server creates (its password is printed once).
BOOTSTRAP_ADMIN = "admin@localhost"

#: How long one look at a running rollback waits for it to move.
POLL = 0.25

Organisation = Annotated[str, typer.Option("--org", help="The organisation to act in (database mode).")]
DatabaseUrl = Annotated[
    str | None,
    typer.Option(
        "--database-url",
        envvar="AGENTREIN_DATABASE_URL",
        help="sqlite:///path.db or postgresql+psycopg://…; default sqlite:///agentrein.db",
    ),
]
ServerUrl = Annotated[
    str | None,
    typer.Option("--url", envvar=URL_ENV, help="An AgentRein server to talk to, instead of a database."),
]
ServerKey = Annotated[str | None, typer.Option("--api-key", envvar=API_KEY_ENV, help="An API key of the server.")]
Glob = Annotated[str | None, typer.Option(help="A glob the action must match (omitted: any).")]
JsonObject = Annotated[str | None, typer.Option(help="A JSON object (omitted: keep what is stored).")]
Reviewer = Annotated[
    str | None,
    typer.Option(help="Who decides (resolvedBy); default: the server names the API key, a database the login."),
]


@contextmanager
def errors_exit() -> Iterator[None]:
    """AgentRein's errors become a red line and exit status 1."""
    try:
        yield
    except AgentReinError as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(1) from None


@frozen
class Target:
    """Where a command works: the server at ``url`` (with ``api_key``), else the database, in ``org``."""

    database_url: str | None
    org: str
    url: str | None
    api_key: str | None


#: The options that make a command's :class:`Target`.
TARGET_OPTIONS = [
    inspect.Parameter("database_url", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=DatabaseUrl),
    inspect.Parameter("org", inspect.Parameter.KEYWORD_ONLY, default=DEFAULT_ORGANISATION, annotation=Organisation),
    inspect.Parameter("url", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=ServerUrl),
    inspect.Parameter("api_key", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=ServerKey),
]


def targeted(command: Callable[..., None]) -> Callable[..., None]:
    """Give ``command`` the options of :data:`TARGET_OPTIONS`; it receives them as its ``target``."""

    @functools.wraps(command)
    def run(**options: Any) -> None:
        command(Target(*(options.pop(p.name) for p in TARGET_OPTIONS)), **options)

    own = inspect.signature(command, eval_str=True)
    kept = [p for p in own.parameters.values() if p.name != "target"]
    run.__signature__ = own.replace(parameters=[*kept, *TARGET_OPTIONS])  # type: ignore[attr-defined]
    return run


@contextmanager
def agentrein(target: Target) -> Iterator[AgentRein]:
    """AgentRein for one command: the server at ``target.url``, else embedded on the database."""
    with errors_exit():
        if target.url:
            ar = AgentRein(base_url=target.url, api_key=target.api_key)
        else:
            ar = AgentRein(target.database_url, organisation=target.org)
        try:
            yield ar
        finally:
            ar.close()


@contextmanager
def _services(target: Target) -> Iterator[tuple[Services, str]]:
    """The server's services on the database (its workers not started), and the organisation's id."""
    from agentrein_server.app import open_services

    services = open_services(target.database_url, rollback_threads=0)
    try:
        yield services, services.engine.organisation_named(target.org).org_id
    finally:
        services.engine.store.close()


def _http(target: Target) -> httpx.Client:
    """For the REST calls the SDK does not make: connector settings, a rollback followed step by step."""
    if not target.url or not target.api_key:
        raise ValidationError("--api-key", f"a server needs an API key (--api-key or ${API_KEY_ENV})")
    headers = {"Authorization": f"Bearer {target.api_key}"}
    return httpx.Client(base_url=target.url.rstrip("/"), headers=headers, timeout=30)


def _rest(http: httpx.Client, method: str, path: str, **request: Any) -> Any:
    """One call: its JSON answer, or an error with the problem's detail."""
    try:
        response = http.request(method, path, **request)
    except httpx.HTTPError as exc:
        raise AgentReinUnavailableError(f"AgentRein server {http.base_url} unreachable: {exc}") from exc
    if response.is_error:
        try:
            detail = response.json().get("detail")
        except ValueError:
            detail = None
        raise AgentReinError(detail or f"HTTP {response.status_code} from {response.url}")
    return response.json()


@app.command()
def demo(
    database_url: DatabaseUrl = None,
    approval: Annotated[
        bool, typer.Option("--approval", help="Hold the Stripe subscription for a reviewer's approval.")
    ] = False,
    approve_after: Annotated[
        float,
        typer.Option(min=0, help="With --approval: seconds to wait for a reviewer before the demo approves itself."),
    ] = 5.0,
) -> None:
    """Onboard a customer on loopback fakes of Stripe and GitHub (customer, subscription, issue, comment); the
    comment fails and AgentRein undoes the rest, last first, across both services."""
    from agentrein_server.demo.run import run_demo

    with errors_exit():
        run_demo(database_url, console, approval=approval, approve_after=approve_after)


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535)] = 8000,
    database_url: DatabaseUrl = None,
    rollback_workers: Annotated[int, typer.Option(min=0, max=64, help="Rollback worker threads (0: none).")] = 2,
) -> None:
    """Run the AgentRein server (REST API, OpenAPI at /schema, workers). On an empty database it creates
    organisation 'default' (plan team) and prints one operator API key, once."""
    import uvicorn

    from agentrein_server.app import create_app, open_services

    with errors_exit():
        services = open_services(database_url, rollback_threads=rollback_workers)
        created = _bootstrap(services.engine)
    if created is not None:
        key, password = created
        console.print(
            f"Created organisation 'default' (plan team). Dashboard: sign in at http://{host}:{port}/ as "
            f"{BOOTSTRAP_ADMIN} with the password {password} (shown only now; add users under Users, or with "
            "'agentrein users create'). The operator API key, shown only now:",
            soft_wrap=True,
            highlight=False,
        )
        print(key, flush=True)
    console.print(
        f"AgentRein on http://{host}:{port}  (dashboard: /, API docs: /schema)  database: {services.engine.store.url}",
        soft_wrap=True,
    )
    uvicorn.run(create_app(services, run_workers=rollback_workers > 0), host=host, port=port, log_level="warning")


def _bootstrap(engine: Engine) -> tuple[str, str] | None:
    """On an empty database: organisation 'default' with an operator key and a dashboard admin; their
    secrets (key, password), else None."""
    if engine.list_organisations():
        return None
    try:
        org = engine.create_organisation(DEFAULT_ORGANISATION, Plan.TEAM)
    except (ValidationError, InvalidTransitionError):
        return None  # another replica starting at the same moment created it
    password = secrets.token_urlsafe(12)
    engine.create_user(org.org_id, BOOTSTRAP_ADMIN, UserRole.ADMIN, password)
    return engine.create_api_key(org.org_id, Role.OPERATOR)[1], password


@contextmanager
def _engine(database_url: str | None) -> Iterator[Engine]:
    with errors_exit():
        store = Store(database_url)
        try:
            yield Engine(store)
        finally:
            store.close()


@orgs.command("create")
def orgs_create(
    name: str,
    plan: Annotated[Plan, typer.Option(help="team: everything; free: no approval gates.")] = Plan.TEAM,
    database_url: DatabaseUrl = None,
) -> None:
    """Create an organisation."""
    with _engine(database_url) as engine:
        org = engine.create_organisation(name, plan)
        console.print(f"Created organisation {org.name!r} ({org.org_id}), plan {org.plan}")


@orgs.command("list")
def orgs_list(database_url: DatabaseUrl = None) -> None:
    """The organisations and their plans."""
    with _engine(database_url) as engine:
        table = _table("organisation", "plan", "id")
        for org in engine.list_organisations():
            table.add_row(org.name, org.plan, org.org_id)
        console.print(table)


@keys.command("create")
def keys_create(
    role: Annotated[Role, typer.Option(help="agent: records its own work; operator: also reviews and manages.")],
    org: Organisation = DEFAULT_ORGANISATION,
    database_url: DatabaseUrl = None,
) -> None:
    """Create an API key; the key is printed alone on the last line, and never again."""
    with _engine(database_url) as engine:
        key, secret = engine.create_api_key(engine.organisation_named(org).org_id, role)
        console.print(f"Created {key.role} key {key.key_id} for organisation {org!r}. The key, shown only now:")
        print(secret, flush=True)


@users.command("create")
def users_create(
    email: str,
    password: Annotated[
        str, typer.Option(prompt=True, hide_input=True, confirmation_prompt=True, help="Asked for when left out.")
    ],
    role: Annotated[UserRole, typer.Option(help="reviewer decides; admin also manages.")] = UserRole.REVIEWER,
    org: Organisation = DEFAULT_ORGANISATION,
    database_url: DatabaseUrl = None,
) -> None:
    """Add a dashboard user, who signs in with EMAIL and the password at the server's root URL."""
    with _engine(database_url) as engine:
        user = engine.create_user(engine.organisation_named(org).org_id, email, role, password)
        console.print(f"{user.email} can now sign in to the dashboard as {user.role} of {org!r}.", highlight=False)


@users.command("list")
def users_list(org: Organisation = DEFAULT_ORGANISATION, database_url: DatabaseUrl = None) -> None:
    """The organisation's dashboard users."""
    with _engine(database_url) as engine:
        table = _table("email", "role", "added")
        for user in engine.list_users(engine.organisation_named(org).org_id):
            table.add_row(user.email, user.role, user.created_at.strftime("%Y-%m-%d %H:%M"))
        console.print(table)


@users.command("remove")
def users_remove(email: str, org: Organisation = DEFAULT_ORGANISATION, database_url: DatabaseUrl = None) -> None:
    """Remove a dashboard user (their past decisions keep their name)."""
    with _engine(database_url) as engine:
        org_id = engine.organisation_named(org).org_id
        found = [u for u in engine.list_users(org_id) if u.email == email.strip().lower()]
        if not found:
            raise NotFoundError("user", email, key="email")
        engine.delete_user(org_id, found[0].user_id)
        console.print(f"Removed {found[0].email}.", highlight=False)


@db.command("upgrade")
def db_upgrade(database_url: DatabaseUrl = None) -> None:
    """Create or migrate the schema to the latest version."""
    with errors_exit():
        store = Store(database_url, migrate=False)
        store.upgrade()
    console.print(f"Schema up to date in {store.url}")
    store.close()


@sessions.command("list")
@targeted
def sessions_list(target: Target, limit: Annotated[int, typer.Option(min=1, max=1000)] = 50) -> None:
    """The newest sessions with their display status."""
    with agentrein(target) as ar:
        table = _table("session", "agent", "display status", "actions", "created", "intent")
        for s in ar.list_sessions(limit):
            table.add_row(
                s.id, s.agent_id, s.display_status, str(len(s.actions)), f"{s.created_at:%Y-%m-%d %H:%M:%S}", s.intent
            )
        console.print(table)


@sessions.command("show")
@targeted
def sessions_show(target: Target, session_id: str) -> None:
    """One session: its status and its actions in order."""
    from agentrein_server.demo.run import actions_table

    with agentrein(target) as ar:
        s = ar.get_session(session_id)
        console.print(f"[bold]{s.id}[/]  agent {s.agent_id}  status {s.status}  display [bold]{s.display_status}[/]")
        console.print(f"intent: {escape(s.intent)}", highlight=False)
        console.print(actions_table(s))
        checks = [(f"#{a.seq} {a.api_name}", a.verification) for a in s.actions if a.verification is not None]
        if s.verification is not None:
            checks.append(("the session", s.verification))
        if checks:
            table = _table("intent check", "outcome", "rationale", "verifier")
            for subject, check in checks:
                shown = (escape(subject), check.outcome or "waiting", escape(check.rationale), escape(check.verifier))
                table.add_row(*shown)
            console.print(table)


@app.command("rollback")
@targeted
def rollback_session(target: Target, session_id: str) -> None:
    """Roll a session back, last action first: a progress bar over the undo chain, then the outcomes.

    A server runs the inverses itself; on a database this command runs them, through the connectors enabled
    for the organisation (`agentrein connectors enable`). Exit status 1 when the rollback fails."""
    with agentrein(target) as ar:
        before = ar.get_session(session_id)
        running = _server_rollback(target, session_id) if target.url else _local_rollback(target, session_id)
        with running as (job, look):
            job, after = _follow(ar, before, job, look)
    table = _table("seq", "api name", "status", "undo status", "error")
    for action in sorted(after.actions, key=lambda a: a.seq, reverse=True):
        table.add_row(str(action.seq), action.api_name, action.status, action.undo_status, action.error or "")
    console.print(table)
    console.print(f"Session {after.id}: display status [bold]{after.display_status}[/]")
    then = "" if target.url else f", then `agentrein rollback {after.id}` again"
    for approval in after.approvals:
        if approval.purpose is ApprovalPurpose.ROLLBACK and approval.status is ApprovalStatus.PENDING:
            console.print(
                f"The rollback waits for a reviewer: `agentrein approvals approve {approval.approval_id}`{then}"
            )
    if job.status is RollbackStatus.FAILED:
        console.print(f"[red]error:[/] the rollback failed: {job.error}")
        raise typer.Exit(1)


Look = Callable[[], Rollback]


def _follow(ar: AgentRein, before: SessionInfo, job: Rollback, look: Look) -> tuple[Rollback, SessionInfo]:
    """Show the rollback advancing until it has ended or waits for a reviewer: the job and session then."""
    walk = {a.action_id: a.updated_at for a in undo_chain(job, before.actions)}
    columns = (TextColumn("undoing"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console) as progress:
        bar = progress.add_task("undo chain", total=len(walk))
        while True:
            job = look()
            session = ar.get_session(before.id)
            progress.update(bar, completed=sum(_through(a, walk) for a in session.actions))
            undoing = any(a.undo_status is UndoStatus.IN_PROGRESS for a in session.actions)
            if job.status is not RollbackStatus.RUNNING and not undoing:
                return job, session


def _through(action: Action, walk: dict[str, datetime]) -> bool:
    """Whether the chain has dealt with ``action`` since it started."""
    if action.action_id not in walk or action.updated_at == walk[action.action_id]:
        return False
    return is_through(action)


@contextmanager
def _server_rollback(target: Target, session_id: str) -> Iterator[tuple[Rollback, Look]]:
    """The server runs the rollback; each look asks it how the job stands."""
    path = f"/sessions/{quote(session_id, safe='')}/rollback"
    with _http(target) as http:
        job = from_wire(_rest(http, "POST", path, json={"reason": "agentrein rollback"}), Rollback)
        yield job, lambda: from_wire(_rest(http, "GET", path, params={"wait": POLL}), Rollback)


@contextmanager
def _local_rollback(target: Target, session_id: str) -> Iterator[tuple[Rollback, Look]]:
    """This process runs the rollback, in a thread, as a server would (through the stored connector settings)."""
    with _services(target) as (services, org_id):
        engine = services.engine
        _check_enabled(engine, org_id, session_id)
        job = engine.request_rollback(
            org_id, session_id, caller_role=Role.OPERATOR, requested_by="cli", trigger="agentrein rollback"
        )
        with ThreadPoolExecutor(1) as pool:
            running = pool.submit(engine.run_rollback, org_id, job.rollback_id, services.workers.executor)

            def look() -> Rollback:
                try:
                    ran = running.result(timeout=POLL)
                except TimeoutError:
                    return evolve(job, status=RollbackStatus.RUNNING)
                if ran.status is RollbackStatus.RUNNING:  # another process holds the job: watch it
                    return engine.wait_for_rollback(org_id, session_id, POLL) or ran
                return ran

            yield job, look


def _check_enabled(engine: Engine, org_id: str, session_id: str) -> None:
    """Refuse to start a rollback whose inverses would fail for want of a connector's settings."""
    enabled = {c.connector for c in engine.list_connector_configs(org_id) if c.enabled}
    actions = engine.get_session(org_id, session_id).actions
    missing = {a.connector for a in actions if a.status in UNDOABLE and a.undo and not a.undo.is_none} - enabled
    if missing:
        raise RollbackRefusedError(
            f"nothing was rolled back: here inverses run through the organisation's connector settings, and "
            f"{', '.join(sorted(missing))} is not enabled (`agentrein connectors enable NAME`)"
        )


@approvals.command("list")
@targeted
def approvals_list(
    target: Target,
    status: Annotated[str | None, typer.Option(help="PENDING, APPROVED, REJECTED or EXPIRED")] = None,
) -> None:
    """Approval requests, pending first and oldest first."""
    with agentrein(target) as ar:
        table = _table("approval", "purpose", "status", "agent", "api name", "time left", "summary")
        for p in ar.list_approvals(status=status):
            flag = " [red](unconfirmed)[/]" if p.unconfirmed else ""
            table.add_row(
                p.approval_id,
                p.purpose,
                f"{p.status}{flag}",
                p.agent_id,
                p.api_name,
                f"{p.time_remaining:.0f}s" if p.time_remaining else "—",
                p.payload_summary,
            )
        console.print(table)


def _table(*columns: str) -> Table:
    """A table whose last column (free text) wraps and whose others (ids, statuses) never do."""
    table = Table()
    for column in columns[:-1]:
        table.add_column(column, no_wrap=True)
    table.add_column(columns[-1], overflow="fold")
    return table


@approvals.command("approve")
@targeted
def approvals_approve(
    target: Target,
    approval_id: str,
    reviewer: Reviewer = None,
    reason: Annotated[str | None, typer.Option()] = None,
) -> None:
    """Approve a pending request; a waiting agent resumes."""
    with agentrein(target) as ar:
        _decided(ar.approve(approval_id, reviewer=_reviewer(reviewer, target), reason=reason), target)


@approvals.command("reject")
@targeted
def approvals_reject(
    target: Target,
    approval_id: str,
    reviewer: Reviewer = None,
    reason: Annotated[str | None, typer.Option(help="Told to the agent in ApprovalRejectedError.reason.")] = None,
) -> None:
    """Reject a pending request; what follows depends on its purpose (status reference §4)."""
    with agentrein(target) as ar:
        _decided(ar.reject(approval_id, reviewer=_reviewer(reviewer, target), reason=reason), target)


def _reviewer(given: str | None, target: Target) -> str | None:
    """Who decides: as given; else the server names the API key, and on a database the login is used."""
    return given or (None if target.url else getpass.getuser())


def _decided(info: ApprovalInfo, target: Target) -> None:
    console.print(
        f"{info.approval_id} {info.status} by {info.resolved_by}; action {info.action_id} is now {info.action_status}"
    )
    undo_next = (info.purpose, info.status) in {
        (ApprovalPurpose.ROLLBACK, ApprovalStatus.APPROVED),
        (ApprovalPurpose.AFTER_EXECUTION, ApprovalStatus.REJECTED),
    }
    if undo_next and not target.url:
        console.print(
            "The undo runs in the agent's process (its wrapped client), or here: "
            f"`agentrein rollback {info.session_id}`"
        )


@policies.command("list")
@targeted
def policies_list(target: Target) -> None:
    """The organisation's policies; the strictest enabled one that matches an action decides it."""
    with agentrein(target) as ar:
        table = _table("policy", "effect", "enabled", "connector", "api name", "agent", "operation", "name")
        for p in ar.list_policies():
            globs = (p.connector, p.api_name, p.agent_id, p.operation_type)
            table.add_row(p.policy_id, p.effect, "yes" if p.enabled else "no", *(g or "*" for g in globs), p.name)
        console.print(table)


@policies.command("add")
@targeted
def policies_add(
    target: Target,
    name: str,
    effect: Annotated[PolicyEffect, typer.Option(help="What a match does to an action.")],
    connector: Glob = None,
    api_name: Glob = None,
    agent_id: Glob = None,
    operation_type: Glob = None,
) -> None:
    """Add a policy; it applies to an action when every glob given matches."""
    with agentrein(target) as ar:
        policy = ar.add_policy(
            name, effect, connector=connector, api_name=api_name, agent_id=agent_id, operation_type=operation_type
        )
        console.print(f"Added policy {policy.policy_id} {policy.name!r}: {policy.effect}")


@policies.command("remove")
@targeted
def policies_remove(target: Target, policy_id: str) -> None:
    """Remove a policy."""
    with agentrein(target) as ar:
        ar.remove_policy(policy_id)
        console.print(f"Removed policy {policy_id}")


@connectors.command("list")
@targeted
def connectors_list(target: Target) -> None:
    """The installed connector plugins, and whether each is enabled for the organisation: rollbacks run in
    a server (or by `agentrein rollback` on a database) undo only through enabled ones."""
    with errors_exit():
        if target.url:
            with _http(target) as http:
                rows = _rest(http, "GET", "/connectors")
        else:
            with _services(target) as (services, org_id):
                stored = {c.connector: c for c in services.engine.list_connector_configs(org_id)}
                rows = [_describe(name, stored.get(name)) for name in services.connectors.names()]
    table = _table("connector", "enabled", "credentials", "config")
    for row in rows:
        credentials = "stored" if row["hasCredentials"] else "—"
        table.add_row(row["name"], "yes" if row["enabled"] else "no", credentials, json.dumps(row["config"]))
    console.print(table)


@connectors.command("enable")
@targeted
def connectors_enable(target: Target, name: str, config: JsonObject = None, credentials: JsonObject = None) -> None:
    """Enable a connector for the organisation, so rollbacks can run its inverses; --config and --credentials
    (stored encrypted) are JSON objects, e.g. --config '{"allowedHosts": ["api.example.com"]}' for http."""
    with errors_exit():
        settings = json_object("--config", config), json_object("--credentials", credentials)
        _configure(target, name, True, *settings)


@connectors.command("disable")
@targeted
def connectors_disable(target: Target, name: str) -> None:
    """Disable a connector for the organisation (its settings are kept): rollbacks no longer run its inverses."""
    with errors_exit():
        _configure(target, name, False, None, None)


def _configure(target: Target, name: str, enabled: bool, config: JSON | None, credentials: JSON | None) -> None:
    """Store the connector's settings; ``None`` keeps the stored config or credentials."""
    if target.url:
        with _http(target) as http:
            path = f"/connectors/{quote(name, safe='')}"
            if config is None:
                config = _rest(http, "GET", path)["config"]
            body = {"enabled": enabled, "config": config, "credentials": credentials}
            row = _rest(http, "PUT", path, json=body)
    else:
        with _services(target) as (services, org_id):
            connector, engine = services.connectors.get(name), services.engine
            if config is None:
                config = _describe(name, engine.connector_config(org_id, name))["config"]
            connector.check_config(config, credentials or {})
            token = services.vault.encrypt(credentials) if credentials is not None else None
            row = _describe(
                name, engine.configure_connector(org_id, name, enabled=enabled, config=config, credentials=token)
            )
    state = "enabled" if row["enabled"] else "disabled"
    stored = "stored" if row["hasCredentials"] else "none"
    console.print(f"Connector {name} {state}; config {json.dumps(row['config'])}; credentials {stored}")


def _describe(name: str, stored: ConnectorConfig | None) -> dict[str, Any]:
    """A connector's settings as ``GET /connectors`` describes them."""
    return {
        "name": name,
        "enabled": bool(stored and stored.enabled),
        "config": stored.config if stored else {},
        "hasCredentials": bool(stored and stored.credentials),
    }

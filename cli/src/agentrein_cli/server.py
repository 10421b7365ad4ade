"""Running the server, and what only its database answers: the schema, organisations and dashboard users."""

from __future__ import annotations

import os
import secrets
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from agentrein_cli.common import (
    DATABASE_URL_ENV,
    AsJson,
    Listing,
    Target,
    console,
    errors_exit,
    print_json,
    targeting,
    when,
    wire_fields,
)
from agentrein_cli.reach import engine, organisation
from agentrein_core.statuses import Plan, Role, UserRole

if TYPE_CHECKING:
    from agentrein_core.engine import Engine

db = typer.Typer(help="The database AgentRein keeps its records in.", no_args_is_help=True)
orgs = typer.Typer(help="Organisations (run on the server's database).", no_args_is_help=True)
users = typer.Typer(help="Dashboard users (run on the server's database).", no_args_is_help=True)

#: The dashboard admin a fresh server creates (its password is printed once).
BOOTSTRAP_ADMIN = "admin@localhost"
#: The server's database when none is named: a file of its own, never the embedded agents' ``agentrein.db``
#: (whose sessions its workers would then roll back).
SERVER_DATABASE_URL = "sqlite:///agentrein-server.db"
#: The administrator's file of the stdio MCP servers organisations may pick by name (read by the mcp connector).
MCP_COMMANDS_ENV = "AGENTREIN_MCP_COMMANDS"

ServerDatabaseUrl = Annotated[
    str | None,
    typer.Option(
        "--database-url",
        envvar=DATABASE_URL_ENV,
        help=f"sqlite:///path.db or postgresql+psycopg://…; default {SERVER_DATABASE_URL} (not the embedded "
        "agents' agentrein.db)",
    ),
]


def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535)] = 8000,
    database_url: ServerDatabaseUrl = None,
    rollback_workers: Annotated[
        int, typer.Option(min=0, max=64, help="Rollback worker threads (0: no background work at all).")
    ] = 2,
    workers: Annotated[
        int,
        typer.Option(
            min=1,
            max=64,
            help="Server processes answering on the port (about one per core). The background work (rollbacks, "
            "approval expiry, webhooks) runs in one of them only.",
        ),
    ] = 1,
    mcp_commands: Annotated[
        Path | None,
        typer.Option(
            "--mcp-commands",
            envvar=MCP_COMMANDS_ENV,
            exists=True,
            dir_okay=False,
            readable=True,
            help='A JSON file {"NAME": {"command": ["program", "arg", ...], "organizations": ["org_..."]}} of the '
            "stdio MCP servers this server may start to undo MCP calls. The organisations it lists (ids, as `orgs "
            'list` shows them) pick one by NAME in their mcp connector settings ({"servers": {"memory": '
            '{"command": "NAME"}}}), never a command line of their own; a command with no list is offered to none. '
            "None by default.",
        ),
    ] = None,
    access_log: Annotated[
        bool, typer.Option("--access-log", help="Log a line per request answered (off: a request logs nothing).")
    ] = False,
) -> None:
    """Run the AgentRein server (REST API, OpenAPI at /schema, workers). On an empty database it creates
    organisation 'default' (plan team) and prints one operator API key, once. Undos reach loopback and private
    addresses only with AGENTREIN_ALLOW_PRIVATE_TARGETS=1 in its environment."""
    from agentrein_core.database import shown_database_url
    from agentrein_server.app import create_app, open_services

    if mcp_commands is not None:  # read where the mcp connector runs: here and in every worker process
        os.environ[MCP_COMMANDS_ENV] = str(mcp_commands.resolve())

    if database_url is None:
        _refuse_a_former_default()
    database_url = database_url or SERVER_DATABASE_URL
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
    else:
        shown = shown_database_url(services.engine.store.url)
        if _embedded_agents_wrote(services.engine):
            clean = shown_database_url(SERVER_DATABASE_URL)
            start_clean = (
                f"`agentrein serve --database-url {clean}` (a new file)"
                if clean != shown
                else "move this file away and start `agentrein serve` again"
            )
            console.print(
                "This database was written by embedded agents (AgentRein() with no server): it has their "
                "organisations but no API key and no dashboard user, and this server's workers will roll back "
                f"their sessions in it. To start clean, give the server a database of its own: {start_clean}. To "
                "serve these records instead, make a key and a user as follows.",
                soft_wrap=True,
                highlight=False,
            )
        console.print(
            "This database has its organisations already, so no key or password is printed. An operator key: "
            f"`agentrein keys create --role operator --database-url {shown}` (--org NAME for another "
            f"organisation than default); a dashboard admin: `agentrein users create EMAIL --role admin "
            f"--database-url {shown}`.",
            soft_wrap=True,
            highlight=False,
        )
    console.print(
        f"AgentRein on http://{host}:{port}  (dashboard: /, API docs: /schema)  "
        f"database: {shown_database_url(services.engine.store.url)}",
        soft_wrap=True,
    )
    console.file.flush()  # what was printed reaches a log or a pipe now, not when the server stops
    if workers > 1:
        from agentrein_server.processes import serve_many

        services.engine.store.close()  # each process opens its own
        raise typer.Exit(
            serve_many(
                database_url, host, port, rollback_threads=rollback_workers, processes=workers, access_log=access_log
            )
        )
    import uvicorn

    from agentrein_server.processes import freeze_startup_heap, uvicorn_options

    app = create_app(services, run_workers=rollback_workers > 0)
    freeze_startup_heap()
    uvicorn.run(app, host=host, port=port, **uvicorn_options(access_log=access_log))


def _refuse_a_former_default() -> None:
    """Versions before this one kept a server's records in ``./agentrein.db`` too. Started there with no database
    named, ``serve`` would open an empty ``./agentrein-server.db`` beside them: a new organisation and key, the
    old keys refused, pending approvals and rollbacks left behind. Say how to go on instead."""
    import sqlite3

    from agentrein_core.database import DEFAULT_DATABASE_URL

    former = Path(DEFAULT_DATABASE_URL.removeprefix("sqlite:///")).absolute()
    if Path(SERVER_DATABASE_URL.removeprefix("sqlite:///")).exists() or not former.exists():
        return
    try:
        with closing(sqlite3.connect(f"{former.as_uri()}?mode=ro", uri=True)) as db:
            served = db.execute("SELECT EXISTS (SELECT 1 FROM api_keys) OR EXISTS (SELECT 1 FROM users)").fetchone()
    except sqlite3.Error:
        return  # not a server's records (no such tables), or not a database at all: nothing to say
    if served[0]:
        console.print(
            f"[red]error:[/] {former} holds a server's records (API keys, dashboard users), and a server now keeps "
            f"its own in ./agentrein-server.db, apart from embedded agents. To go on serving them: `agentrein serve "
            f"--database-url sqlite:///{former}`; or move the file there: `mv {former} agentrein-server.db`.",
            soft_wrap=True,
            highlight=False,
        )
        raise typer.Exit(1)


def _embedded_agents_wrote(found: Engine) -> bool:
    """Whether only embedded agents have used this database: organisations, and no API key or dashboard user
    in any (a server makes both the first time it starts, and hands them out)."""
    listed = found.accounts.list_organisations()
    return bool(listed) and not any(
        found.accounts.list_api_keys(org.org_id) or found.accounts.list_users(org.org_id) for org in listed
    )


def _bootstrap(found: Engine) -> tuple[str, str] | None:
    """On an empty database: organisation 'default' with an operator key and a dashboard admin; their
    secrets (key, password), else None."""
    from agentrein_core.engine import DEFAULT_ORGANISATION
    from agentrein_core.errors import InvalidTransitionError, ValidationError

    if found.accounts.list_organisations():
        return None
    try:
        org = found.accounts.create_organisation(DEFAULT_ORGANISATION, Plan.TEAM)
    except (ValidationError, InvalidTransitionError):
        return None  # another replica starting at the same moment created it
    password = secrets.token_urlsafe(12)
    found.accounts.create_user(org.org_id, BOOTSTRAP_ADMIN, UserRole.ADMIN, password)
    return found.accounts.create_api_key(org.org_id, Role.OPERATOR)[1], password


@db.command("upgrade")
@targeting(server=False, in_organisation=False)
def db_upgrade(target: Target) -> None:
    """Create or migrate the schema to the latest version."""
    from agentrein_core.database import shown_database_url
    from agentrein_core.store import Store

    with errors_exit():
        store = Store(target.database_url, migrate=False)
        store.upgrade()
    console.print(f"Schema up to date in {shown_database_url(store.url)}", highlight=False)
    store.close()


@orgs.command("create")
@targeting(server=False, in_organisation=False)
def orgs_create(
    target: Target,
    name: str,
    plan: Annotated[Plan, typer.Option(help="team: everything; free: no approval gates.")] = Plan.TEAM,
) -> None:
    """Create an organisation (and the database, when it does not exist yet)."""
    with engine(target.database_url, create=True) as found:
        org = found.accounts.create_organisation(name, plan)
        console.print(f"Created organisation {org.name!r} ({org.org_id}), plan {org.plan}")


@orgs.command("list")
@targeting(server=False, in_organisation=False)
def orgs_list(target: Target, as_json: AsJson = False) -> None:
    """The organisations and their plans."""
    with engine(target.database_url) as found:
        listed = found.accounts.list_organisations()
    if as_json:
        print_json([wire_fields(org, ("orgId", "name", "plan", "createdAt")) for org in listed])
        return
    shown = Listing("organisation", "plan", "id", text=False)
    for org in listed:
        shown.add_row(org.name, org.plan, org.org_id)
    console.print(shown)


@users.command("create")
@targeting(server=False, in_organisation=True)
def users_create(
    target: Target,
    email: str,
    password: Annotated[
        str, typer.Option(prompt=True, hide_input=True, confirmation_prompt=True, help="Asked for when left out.")
    ],
    role: Annotated[UserRole, typer.Option(help="reviewer decides; admin also manages.")] = UserRole.REVIEWER,
) -> None:
    """Add a dashboard user, who signs in with EMAIL and the password at the server's root URL."""
    with engine(target.database_url) as found:
        named = organisation(found, target.org)
        user = found.accounts.create_user(named.org_id, email, role, password)
        console.print(
            f"{user.email} can now sign in to the dashboard as {user.role} of {named.name!r}.", highlight=False
        )


@users.command("list")
@targeting(server=False, in_organisation=True)
def users_list(target: Target, as_json: AsJson = False) -> None:
    """The organisation's dashboard users."""
    with engine(target.database_url) as found:
        listed = found.accounts.list_users(organisation(found, target.org).org_id)
    if as_json:
        print_json([wire_fields(user, ("userId", "email", "role", "createdAt")) for user in listed])
        return
    shown = Listing("email", "role", "added", text=False)
    for user in listed:
        shown.add_row(user.email, user.role, when(user.created_at))
    console.print(shown)


@users.command("remove")
@targeting(server=False, in_organisation=True)
def users_remove(target: Target, email: str) -> None:
    """Remove a dashboard user (their past decisions keep their name)."""
    from agentrein_core.errors import NotFoundError

    with engine(target.database_url) as found:
        org_id = organisation(found, target.org).org_id
        matching = [u for u in found.accounts.list_users(org_id) if u.email == email.strip().lower()]
        if not matching:
            raise NotFoundError("user", email, key="email")
        found.accounts.delete_user(org_id, matching[0].user_id)
        console.print(f"Removed {matching[0].email}.", highlight=False)

"""Running the server, and what only its database answers: the schema, organisations, API keys and
dashboard users."""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING, Annotated

import typer

from agentrein_cli.common import DatabaseUrl, Organisation, console, errors_exit, table
from agentrein_cli.reach import engine, organisation
from agentrein_core.statuses import Plan, Role, UserRole

if TYPE_CHECKING:
    from agentrein_core.engine import Engine

db = typer.Typer(help="The database AgentRein keeps its records in.", no_args_is_help=True)
orgs = typer.Typer(help="Organisations (run on the server's database).", no_args_is_help=True)
keys = typer.Typer(help="API keys (run on the server's database; keys are shown once).", no_args_is_help=True)
users = typer.Typer(help="Dashboard users (run on the server's database).", no_args_is_help=True)

#: The dashboard admin a fresh server creates (its password is printed once).
BOOTSTRAP_ADMIN = "admin@localhost"


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


def _bootstrap(found: Engine) -> tuple[str, str] | None:
    """On an empty database: organisation 'default' with an operator key and a dashboard admin; their
    secrets (key, password), else None."""
    from agentrein_core.engine import DEFAULT_ORGANISATION
    from agentrein_core.errors import InvalidTransitionError, ValidationError

    if found.list_organisations():
        return None
    try:
        org = found.create_organisation(DEFAULT_ORGANISATION, Plan.TEAM)
    except (ValidationError, InvalidTransitionError):
        return None  # another replica starting at the same moment created it
    password = secrets.token_urlsafe(12)
    found.create_user(org.org_id, BOOTSTRAP_ADMIN, UserRole.ADMIN, password)
    return found.create_api_key(org.org_id, Role.OPERATOR)[1], password


@db.command("upgrade")
def db_upgrade(database_url: DatabaseUrl = None) -> None:
    """Create or migrate the schema to the latest version."""
    from agentrein_core.store import Store

    with errors_exit():
        store = Store(database_url, migrate=False)
        store.upgrade()
    console.print(f"Schema up to date in {store.url}")
    store.close()


@orgs.command("create")
def orgs_create(
    name: str,
    plan: Annotated[Plan, typer.Option(help="team: everything; free: no approval gates.")] = Plan.TEAM,
    database_url: DatabaseUrl = None,
) -> None:
    """Create an organisation."""
    with engine(database_url) as found:
        org = found.create_organisation(name, plan)
        console.print(f"Created organisation {org.name!r} ({org.org_id}), plan {org.plan}")


@orgs.command("list")
def orgs_list(database_url: DatabaseUrl = None) -> None:
    """The organisations and their plans."""
    with engine(database_url) as found:
        shown = table("organisation", "plan", "id")
        for org in found.list_organisations():
            shown.add_row(org.name, org.plan, org.org_id)
        console.print(shown)


@keys.command("create")
def keys_create(
    role: Annotated[Role, typer.Option(help="agent: records its own work; operator: also reviews and manages.")],
    org: Organisation = None,
    database_url: DatabaseUrl = None,
) -> None:
    """Create an API key; the key is printed alone on the last line, and never again."""
    with engine(database_url) as found:
        named = organisation(found, org)
        key, secret = found.create_api_key(named.org_id, role)
        console.print(f"Created {key.role} key {key.key_id} for organisation {named.name!r}. The key, shown only now:")
        print(secret, flush=True)


@users.command("create")
def users_create(
    email: str,
    password: Annotated[
        str, typer.Option(prompt=True, hide_input=True, confirmation_prompt=True, help="Asked for when left out.")
    ],
    role: Annotated[UserRole, typer.Option(help="reviewer decides; admin also manages.")] = UserRole.REVIEWER,
    org: Organisation = None,
    database_url: DatabaseUrl = None,
) -> None:
    """Add a dashboard user, who signs in with EMAIL and the password at the server's root URL."""
    with engine(database_url) as found:
        named = organisation(found, org)
        user = found.create_user(named.org_id, email, role, password)
        console.print(
            f"{user.email} can now sign in to the dashboard as {user.role} of {named.name!r}.", highlight=False
        )


@users.command("list")
def users_list(org: Organisation = None, database_url: DatabaseUrl = None) -> None:
    """The organisation's dashboard users."""
    with engine(database_url) as found:
        shown = table("email", "role", "added")
        for user in found.list_users(organisation(found, org).org_id):
            shown.add_row(user.email, user.role, user.created_at.strftime("%Y-%m-%d %H:%M"))
        console.print(shown)


@users.command("remove")
def users_remove(email: str, org: Organisation = None, database_url: DatabaseUrl = None) -> None:
    """Remove a dashboard user (their past decisions keep their name)."""
    from agentrein_core.errors import NotFoundError

    with engine(database_url) as found:
        org_id = organisation(found, org).org_id
        matching = [u for u in found.list_users(org_id) if u.email == email.strip().lower()]
        if not matching:
            raise NotFoundError("user", email, key="email")
        found.delete_user(org_id, matching[0].user_id)
        console.print(f"Removed {matching[0].email}.", highlight=False)

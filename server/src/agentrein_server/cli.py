"""The ``agentrein`` command line (typer + rich)."""

from __future__ import annotations

from typing import Annotated

import typer
from agentrein_core.errors import AgentReinError
from agentrein_core.store import Store
from rich.console import Console

app = typer.Typer(help="AgentRein: a safety net for AI agents that call real APIs.", no_args_is_help=True)
db = typer.Typer(help="The database AgentRein keeps its records in.", no_args_is_help=True)
app.add_typer(db, name="db")
console = Console()

DatabaseUrl = Annotated[
    str | None,
    typer.Option(
        "--database-url",
        envvar="AGENTREIN_DATABASE_URL",
        help="sqlite:///path.db or postgresql+psycopg://…; default sqlite:///agentrein.db",
    ),
]


@app.command()
def demo(database_url: DatabaseUrl = None) -> None:
    """Run a four-step agent against a loopback fake service; step four fails and AgentRein undoes the rest."""
    from agentrein_server.demo.run import run_demo

    try:
        run_demo(database_url, console)
    except AgentReinError as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(1) from None


@db.command("upgrade")
def db_upgrade(database_url: DatabaseUrl = None) -> None:
    """Create or migrate the schema to the latest version."""
    try:
        store = Store(database_url, migrate=False)
        store.upgrade()
    except AgentReinError as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(1) from None
    console.print(f"Schema up to date in {store.url}")
    store.close()

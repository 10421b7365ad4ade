"""The ``agentrein`` command line (typer + rich)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from agentrein import AgentRein, ApprovalInfo
from agentrein_core.engine import DEFAULT_ORGANISATION
from agentrein_core.errors import AgentReinError
from agentrein_core.store import Store

app = typer.Typer(help="AgentRein: a safety net for AI agents that call real APIs.", no_args_is_help=True)
db = typer.Typer(help="The database AgentRein keeps its records in.", no_args_is_help=True)
sessions = typer.Typer(help="Sessions and their actions.", no_args_is_help=True)
approvals = typer.Typer(help="Approval requests: list them and decide them.", no_args_is_help=True)
app.add_typer(db, name="db")
app.add_typer(sessions, name="sessions")
app.add_typer(approvals, name="approvals")
console = Console()

Organisation = Annotated[str, typer.Option("--org", help="The organisation to act in.")]
DatabaseUrl = Annotated[
    str | None,
    typer.Option(
        "--database-url",
        envvar="AGENTREIN_DATABASE_URL",
        help="sqlite:///path.db or postgresql+psycopg://…; default sqlite:///agentrein.db",
    ),
]


@contextmanager
def agentrein(database_url: str | None, organisation: str = DEFAULT_ORGANISATION) -> Iterator[AgentRein]:
    """An embedded AgentRein for one command; AgentRein's errors become a red line and exit status 1."""
    try:
        ar = AgentRein(database_url, organisation=organisation)
        try:
            yield ar
        finally:
            ar.close()
    except AgentReinError as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(1) from None


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


@sessions.command("list")
def sessions_list(
    database_url: DatabaseUrl = None,
    org: Organisation = DEFAULT_ORGANISATION,
    limit: Annotated[int, typer.Option(min=1, max=1000)] = 50,
) -> None:
    """The newest sessions with their display status."""
    with agentrein(database_url, org) as ar:
        table = _table("session", "agent", "display status", "actions", "created", "intent")
        for s in ar.list_sessions(limit):
            table.add_row(
                s.id, s.agent_id, s.display_status, str(len(s.actions)), f"{s.created_at:%Y-%m-%d %H:%M:%S}", s.intent
            )
        console.print(table)


@sessions.command("show")
def sessions_show(session_id: str, database_url: DatabaseUrl = None, org: Organisation = DEFAULT_ORGANISATION) -> None:
    """One session: its status and its actions in order."""
    from agentrein_server.demo.run import actions_table

    with agentrein(database_url, org) as ar:
        s = ar.get_session(session_id)
        console.print(f"[bold]{s.id}[/]  agent {s.agent_id}  status {s.status}  display [bold]{s.display_status}[/]")
        console.print(f"intent: {s.intent}")
        console.print(actions_table(s))


@approvals.command("list")
def approvals_list(
    database_url: DatabaseUrl = None,
    org: Organisation = DEFAULT_ORGANISATION,
    status: Annotated[str | None, typer.Option(help="PENDING, APPROVED, REJECTED or EXPIRED")] = None,
) -> None:
    """Approval requests, pending first and oldest first."""
    with agentrein(database_url, org) as ar:
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


def _decided(info: ApprovalInfo) -> None:
    console.print(
        f"{info.approval_id} {info.status} by {info.resolved_by}; action {info.action_id} is now {info.action_status}"
    )


@approvals.command("approve")
def approvals_approve(
    approval_id: str,
    reviewer: Annotated[str, typer.Option(help="Who decides (recorded as resolvedBy).")],
    reason: Annotated[str | None, typer.Option()] = None,
    database_url: DatabaseUrl = None,
    org: Organisation = DEFAULT_ORGANISATION,
) -> None:
    """Approve a pending request; a waiting agent resumes."""
    with agentrein(database_url, org) as ar:
        _decided(ar.approve(approval_id, reviewer=reviewer, reason=reason))


@approvals.command("reject")
def approvals_reject(
    approval_id: str,
    reviewer: Annotated[str, typer.Option(help="Who decides (recorded as resolvedBy).")],
    reason: Annotated[str | None, typer.Option(help="Told to the agent in ApprovalRejectedError.reason.")] = None,
    database_url: DatabaseUrl = None,
    org: Organisation = DEFAULT_ORGANISATION,
) -> None:
    """Reject a pending request; what follows depends on its purpose (status reference §4)."""
    with agentrein(database_url, org) as ar:
        _decided(ar.reject(approval_id, reviewer=reviewer, reason=reason))

"""The ``demo`` command the ``agentrein`` command line finds under its ``agentrein.commands`` entry points.
Only typer is imported until it runs."""

from __future__ import annotations

from typing import Annotated

import typer


def demo(
    database_url: Annotated[
        str | None,
        typer.Option(
            "--database-url",
            envvar="AGENTREIN_DATABASE_URL",
            help="sqlite:///path.db or postgresql+psycopg://…; default sqlite:///agentrein.db",
        ),
    ] = None,
    approval: Annotated[
        bool, typer.Option("--approval", help="Hold the Stripe subscription for a reviewer's approval.")
    ] = False,
    approve_after: Annotated[
        float,
        typer.Option(min=0, help="With --approval: seconds to wait for a reviewer before the demo approves itself."),
    ] = 60.0,  # run.APPROVE_AFTER, not imported here: --help stays quick
) -> None:
    """Onboard a customer on loopback fakes of Stripe and GitHub (customer, subscription, issue, comment); the
    comment fails and AgentRein undoes the rest, last first, across both services."""
    from rich.console import Console

    from agentrein_demo.run import run_demo

    run_demo(database_url, Console(), approval=approval, approve_after=approve_after)

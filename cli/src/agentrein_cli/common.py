"""What every command shares: the console, errors as a red line, tables, and the options that say where a
command works (its :class:`Target`).

Only typer, rich and the status enums are imported here and in the command modules at start-up; what a command
needs to reach AgentRein is imported when it runs (:mod:`agentrein_cli.reach`), so ``agentrein --help`` starts
at once.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from agentrein_core.errors import AgentReinError

F = TypeVar("F", bound=Callable[..., Any])

console = Console()

# The environment variables the SDK and the server read, spelled here so that --help can name them without
# importing either.
DATABASE_URL_ENV = "AGENTREIN_DATABASE_URL"
URL_ENV = "AGENTREIN_URL"
API_KEY_ENV = "AGENTREIN_API_KEY"

DatabaseUrl = Annotated[
    str | None,
    typer.Option(
        "--database-url",
        envvar=DATABASE_URL_ENV,
        help="sqlite:///path.db or postgresql+psycopg://…; default sqlite:///agentrein.db",
    ),
]
Organisation = Annotated[
    str | None,
    typer.Option("--org", help="The organisation to act in (database mode); default: the one `serve` creates."),
]
ServerUrl = Annotated[
    str | None,
    typer.Option("--url", envvar=URL_ENV, help="An AgentRein server to talk to, instead of a database."),
]
ServerKey = Annotated[str | None, typer.Option("--api-key", envvar=API_KEY_ENV, help="An API key of the server.")]


@contextmanager
def errors_exit() -> Iterator[None]:
    """AgentRein's errors become a red line and exit status 1."""
    try:
        yield
    except AgentReinError as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(1) from None


def reported(command: F) -> F:
    """``command`` with :func:`errors_exit` around it (for commands other distributions add)."""

    @functools.wraps(command)
    def run(*args: Any, **options: Any) -> Any:
        with errors_exit():
            return command(*args, **options)

    return run  # type: ignore[return-value]


@dataclass(frozen=True)
class Target:
    """Where a command works: the server at ``url`` (with ``api_key``), else the database, in ``org``
    (``None``: the default organisation)."""

    database_url: str | None
    org: str | None
    url: str | None
    api_key: str | None


#: The options that make a command's :class:`Target`.
TARGET_OPTIONS = [
    inspect.Parameter("database_url", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=DatabaseUrl),
    inspect.Parameter("org", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Organisation),
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


def table(*columns: str, title: str | None = None) -> Table:
    """A table whose last column (free text) wraps and whose others (ids, statuses) never do."""
    shown = Table(title=title)
    for column in columns[:-1]:
        shown.add_column(column, no_wrap=True)
    shown.add_column(columns[-1], overflow="fold")
    return shown

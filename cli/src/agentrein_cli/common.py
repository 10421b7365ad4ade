"""What every command shares: the consoles, errors as a red line, listings, ``--json``, and the options that say
where a command works (its :class:`Target`).

Only typer, rich and the status enums are imported here and in the command modules at start-up; what a command
needs to reach AgentRein is imported when it runs (:mod:`agentrein_cli.reach`), so ``agentrein --help`` starts
at once.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from agentrein_core.errors import AgentReinError, ValidationError

if TYPE_CHECKING:
    from rich.console import ConsoleOptions, RenderResult

F = TypeVar("F", bound=Callable[..., Any])

#: What a command answers (tables, outcomes, ``--json``).
console = Console()
#: Errors, and which database or server a command used: on stderr, so that what a command answers on stdout
#: (``--json`` above all) is only that.
notices = Console(stderr=True)

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
    typer.Option(
        "--url",
        envvar=URL_ENV,
        help="An AgentRein server to talk to, instead of a database (a --database-url typed wins over the variable).",
    ),
]
ServerKey = Annotated[str | None, typer.Option("--api-key", envvar=API_KEY_ENV, help="An API key of the server.")]
AsJson = Annotated[
    bool,
    typer.Option("--json", help="Print JSON instead of a table: the REST API's records, with its field names."),
]


@contextmanager
def errors_exit() -> Iterator[None]:
    """AgentRein's errors become a red line and exit status 1."""
    try:
        yield
    except AgentReinError as exc:
        notices.print(f"[red]error:[/] {exc}", highlight=False)
        raise typer.Exit(1) from None


def reported(command: F) -> F:
    """``command`` with :func:`errors_exit` around it (for commands other distributions add)."""

    @functools.wraps(command)
    def run(*args: Any, **options: Any) -> Any:
        with errors_exit():
            return command(*args, **options)

    return run  # type: ignore[return-value]


def print_json(data: Any) -> None:
    """``data`` alone on stdout, as JSON (no colour, no wrapping)."""
    typer.echo(json.dumps(data, indent=2, ensure_ascii=False))


def when(moment: datetime | str) -> str:
    """A time (or its ISO 8601 text, as the REST API writes times) as a listing shows it."""
    return f"{datetime.fromisoformat(moment) if isinstance(moment, str) else moment:%Y-%m-%d %H:%M:%S}"


def wire_fields(record: Any, fields: Collection[str]) -> dict[str, Any]:
    """``record`` as the REST API writes records (camelCase, ISO 8601 times), keeping only ``fields``."""
    from agentrein_core.converter import to_wire

    return {k: v for k, v in to_wire(record).items() if k in fields}


@dataclass(frozen=True)
class Target:
    """Where a command works: the server at ``url`` (with ``api_key``), else the database, in ``org``
    (``None``: the default organisation)."""

    database_url: str | None = None
    org: str | None = None
    url: str | None = None
    api_key: str | None = None

    def described(self, *, in_organisation: bool) -> str:
        """Which server, or which database (and organisation): never a database password."""
        if self.url:
            return f"the server {self.url}"
        from agentrein_core.database import resolve_database_url, shown_database_url
        from agentrein_core.model import DEFAULT_ORGANISATION  # not the engine: it loads the store and httpx

        database = f"the database {shown_database_url(resolve_database_url(self.database_url))}"
        return f"{database} (organisation {self.org or DEFAULT_ORGANISATION})" if in_organisation else database


_OPTION = inspect.Parameter.KEYWORD_ONLY
DATABASE_OPTION = inspect.Parameter("database_url", _OPTION, default=None, annotation=DatabaseUrl)
ORGANISATION_OPTION = inspect.Parameter("org", _OPTION, default=None, annotation=Organisation)
SERVER_OPTIONS = [
    inspect.Parameter("url", _OPTION, default=None, annotation=ServerUrl),
    inspect.Parameter("api_key", _OPTION, default=None, annotation=ServerKey),
]


def targeting(*, server: bool, in_organisation: bool) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """A decorator that gives a command the options that make its :class:`Target` (``--database-url``; with
    ``in_organisation`` ``--org``; with ``server`` ``--url`` and ``--api-key``), which it receives as its
    ``target``. The command first says on stderr which server or database it uses."""
    added = [DATABASE_OPTION, *([ORGANISATION_OPTION] if in_organisation else []), *(SERVER_OPTIONS if server else [])]
    context = inspect.Parameter("context", _OPTION, annotation=typer.Context)

    def decorate(command: Callable[..., None]) -> Callable[..., None]:
        @functools.wraps(command)
        def run(context: typer.Context, **options: Any) -> None:
            with errors_exit():
                target = _chosen(context, {p.name: options.pop(p.name) for p in added})
            notices.print(f"Using {target.described(in_organisation=in_organisation)}", highlight=False, soft_wrap=True)
            command(target, **options)

        own = inspect.signature(command, eval_str=True)
        kept = [p for p in own.parameters.values() if p.name != "target"]
        run.__signature__ = own.replace(parameters=[*kept, *added, context])  # type: ignore[attr-defined]
        return run

    return decorate


def _chosen(context: typer.Context, given: dict[str, Any]) -> Target:
    """The target the options name. A server wins over a database, unless only the database was named on the
    command line (the server coming from ``$AGENTREIN_URL``): what is typed is what the command uses."""

    def typed(name: str) -> bool:
        source = context.get_parameter_source(name)
        return given.get(name) is not None and source is not None and source.name == "COMMANDLINE"

    if given.get("url"):
        if typed("database_url"):
            if typed("url"):
                raise ValidationError("--database-url", "give a server (--url) or a database, not both")
            given |= {"url": None, "api_key": None}
        elif given.get("org") is not None:
            raise ValidationError(
                "--org", "on a server the API key decides the organisation; for one of a database give --database-url"
            )
    return Target(**given)


#: Most commands: on a server, or on a database in one of its organisations.
targeted = targeting(server=True, in_organisation=True)

#: Below this width the free text of a listing's last column would read as a narrow strip: show blocks instead.
NARROWEST_TEXT = 16


class Listing:
    """Records for a person to read: a table where the terminal is wide enough to show every cell whole, else
    one block per record (its first cell as the heading, then a line per field). Ids, statuses and times are
    never cut: only the last column, when ``text`` (free text), wraps. A ``str`` cell is shown as it is (what
    an agent wrote is never read as markup); a :class:`~rich.text.Text` cell keeps its style."""

    def __init__(self, *columns: str, title: str | None = None, text: bool = True) -> None:
        self.columns = columns
        self.title = title
        self.text = text
        self.rows: list[list[Text]] = []

    def add_row(self, *cells: str | Text) -> None:
        self.rows.append([cell if isinstance(cell, Text) else Text(cell) for cell in cells])

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        widths = [max([len(name), *(row[n].cell_len for row in self.rows)]) for n, name in enumerate(self.columns)]
        if self.text:
            widths[-1] = min(widths[-1], NARROWEST_TEXT)
        # each cell has a space either side, and a border runs before every column and after the last
        if sum(widths) + 3 * len(widths) + 1 <= options.max_width:
            yield self._table()
        else:
            yield from self._blocks(console, options.max_width)

    def _table(self) -> Table:
        shown = Table(title=self.title)
        for n, name in enumerate(self.columns):
            wraps = self.text and n == len(self.columns) - 1
            shown.add_column(name, no_wrap=not wraps, overflow="fold")
        for row in self.rows:
            shown.add_row(*row)
        return shown

    def _blocks(self, console: Console, width: int) -> Iterator[Text]:
        if self.title:
            yield Text(self.title, style="bold", overflow="fold")
        names = self.columns[1:]
        indent = 2 + max(map(len, names), default=0) + 2
        for n, (heading, *cells) in enumerate(self.rows):
            if n:
                yield Text()
            label = f"{self.columns[0]} "
            line = Text.assemble((label, "dim"), heading, overflow="fold")
            line.stylize("bold", len(label))
            yield line
            for name, cell in zip(names, cells, strict=True):
                # the value wraps (a word too long for the line folds) under itself, never under the names
                for k, part in enumerate(cell.wrap(console, max(width - indent, 1), overflow="fold")):
                    part.rstrip()
                    yield Text.assemble(((f"  {name}" if k == 0 else "").ljust(indent), "dim"), part)

"""The ``agentrein`` command line (typer + rich).

The commands that read and decide work on a server (``--url`` and ``--api-key``, or ``$AGENTREIN_URL`` and
``$AGENTREIN_API_KEY``; the key decides the organisation) or, without one, directly on a database
(``--database-url`` or ``$AGENTREIN_DATABASE_URL``, in the organisation ``--org``); each says on stderr which
one it used, and each list and show takes ``--json``. Other distributions add commands under the
``agentrein.commands`` entry points (agentrein-demo adds ``agentrein demo``).
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

import typer
from typer.core import TyperGroup

from agentrein_cli.approvals import approvals
from agentrein_cli.common import reported
from agentrein_cli.connectors import connectors
from agentrein_cli.keys import keys
from agentrein_cli.mcp import mcp
from agentrein_cli.policies import policies
from agentrein_cli.server import db, orgs, serve, users
from agentrein_cli.sessions import rollback, sessions

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

#: The entry-point group of the commands other distributions add: ``name = "module:function"``, a function
#: typer makes a command of.
COMMANDS_GROUP = "agentrein.commands"


class Commands(TyperGroup):
    """The built-in commands, then the added ones, each loaded only when it is run or listed."""

    # typer's own click types are private: the signatures say Any where they would name them.
    def list_commands(self, ctx: Any) -> list[str]:
        built_in = super().list_commands(ctx)
        return [*built_in, *sorted(name for name in _added() if name not in built_in)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        found = super().get_command(ctx, cmd_name)
        if found is None and cmd_name in _added():
            holder = typer.Typer(add_completion=False)
            holder.command(cmd_name)(reported(_added()[cmd_name].load()))
            found = typer.main.get_command(holder)
            self.add_command(found, cmd_name)
        return found


@cache
def _added() -> dict[str, EntryPoint]:
    from importlib.metadata import entry_points

    return {point.name: point for point in entry_points(group=COMMANDS_GROUP)}


app = typer.Typer(cls=Commands, help="AgentRein: a safety net for AI agents that call real APIs.", no_args_is_help=True)
app.command()(serve)
app.command()(rollback)
app.add_typer(sessions, name="sessions")
app.add_typer(approvals, name="approvals")
app.add_typer(policies, name="policies")
app.add_typer(connectors, name="connectors")
app.add_typer(orgs, name="orgs")
app.add_typer(keys, name="keys")
app.add_typer(users, name="users")
app.add_typer(db, name="db")
app.add_typer(mcp, name="mcp")

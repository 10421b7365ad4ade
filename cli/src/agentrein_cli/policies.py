"""The organisation's policies: listed, added and removed."""

from __future__ import annotations

from typing import Annotated

import typer

from agentrein_cli.common import Target, console, table, targeted
from agentrein_cli.reach import records
from agentrein_core.statuses import PolicyEffect

policies = typer.Typer(help="The organisation's policies: ALLOW < REQUIRE_APPROVAL < BLOCK.", no_args_is_help=True)

Glob = Annotated[str | None, typer.Option(help="A glob the action must match (omitted: any).")]


@policies.command("list")
@targeted
def policies_list(target: Target) -> None:
    """The organisation's policies; the strictest enabled one that matches an action decides it."""
    with records(target) as found:
        shown = table("policy", "effect", "enabled", "connector", "api name", "agent", "operation", "name")
        for p in found.list_policies():
            globs = (p.connector, p.api_name, p.agent_id, p.operation_type)
            shown.add_row(p.policy_id, p.effect, "yes" if p.enabled else "no", *(g or "*" for g in globs), p.name)
        console.print(shown)


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
    with records(target) as found:
        policy = found.add_policy(
            name, effect, connector=connector, api_name=api_name, agent_id=agent_id, operation_type=operation_type
        )
        console.print(f"Added policy {policy.policy_id} {policy.name!r}: {policy.effect}")


@policies.command("remove")
@targeted
def policies_remove(target: Target, policy_id: str) -> None:
    """Remove a policy."""
    with records(target) as found:
        found.remove_policy(policy_id)
        console.print(f"Removed policy {policy_id}")

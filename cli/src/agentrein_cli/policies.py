"""The organisation's policies: listed, added and removed."""

from __future__ import annotations

from typing import Annotated

import typer

from agentrein_cli.common import AsJson, Listing, Target, console, print_json, targeted
from agentrein_cli.reach import records
from agentrein_core.statuses import PolicyEffect

policies = typer.Typer(
    help=(
        "The organisation's policies: ALLOW < REQUIRE_APPROVAL after execution (the call runs, then a reviewer "
        "looks at it) < REQUIRE_APPROVAL before execution (the call waits for a reviewer) < BLOCK."
    ),
    no_args_is_help=True,
)

Glob = Annotated[str | None, typer.Option(help="A glob the action must match (omitted: any).")]


@policies.command("list")
@targeted
def policies_list(target: Target, as_json: AsJson = False) -> None:
    """The organisation's policies; the strictest enabled one that matches an action decides it. A
    REQUIRE_APPROVAL policy has a reviewer look at a call before it runs (the agent waits) or after it ran."""
    from agentrein_core.policies import review_timing

    with records(target) as found:
        listed = found.list_policies()
    if as_json:
        from agentrein_core.converter import to_wire

        print_json(to_wire(listed))  # as GET /policies answers
        return
    shown = Listing("policy", "effect", "reviewed", "enabled", "connector", "api name", "agent", "operation", "name")
    for p in listed:
        globs = (p.connector, p.api_name, p.agent_id, p.operation_type)
        enabled = "yes" if p.enabled else "no"
        shown.add_row(p.policy_id, p.effect, review_timing(p) or "-", enabled, *(g or "*" for g in globs), p.name)
    console.print(shown)


@policies.command("add")
@targeted
def policies_add(
    target: Target,
    name: str,
    effect: Annotated[
        PolicyEffect,
        # the choices in the help, not the metavar: a narrow metavar column broke REQUIRE_APPROVAL in two
        typer.Option(metavar="EFFECT", help="What a match does to an action: ALLOW, REQUIRE_APPROVAL or BLOCK."),
    ],
    connector: Glob = None,
    api_name: Glob = None,
    agent_id: Glob = None,
    operation_type: Glob = None,
    before_execution: Annotated[
        bool,
        typer.Option(
            "--before-execution",
            help=(
                "REQUIRE_APPROVAL only: hold a matching call until a reviewer approves it, for every agent. "
                "Without it the call runs first and a reviewer looks at it afterwards (a rejection undoes it)."
            ),
        ),
    ] = False,
    approval_timeout: Annotated[
        float | None,
        typer.Option(
            "--approval-timeout", min=0.001, help="With --before-execution: minutes a held call waits for a reviewer."
        ),
    ] = None,
) -> None:
    """Add a policy; it applies to an action when every glob given matches."""
    from agentrein_core.commands import NewPolicy
    from agentrein_core.policies import describe

    with records(target, create_organisation=True) as found:
        new = NewPolicy(
            name,
            effect,
            connector=connector,
            api_name=api_name,
            agent_id=agent_id,
            operation_type=operation_type,
            before_execution=before_execution,
            approval_timeout_ms=round(approval_timeout * 60_000) if approval_timeout is not None else None,
        )
        policy = found.add_policy(new)
        console.print(f"Added policy {policy.policy_id} {policy.name!r}: {policy.effect}, {describe(policy)}")


@policies.command("remove")
@targeted
def policies_remove(target: Target, policy_id: str) -> None:
    """Remove a policy."""
    with records(target) as found:
        found.remove_policy(policy_id)
        console.print(f"Removed policy {policy_id}")

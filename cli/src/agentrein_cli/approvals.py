"""Approval requests: listed, approved and rejected."""

from __future__ import annotations

import getpass
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text

from agentrein_cli.common import AsJson, Listing, Target, console, print_json, targeted, wire_fields
from agentrein_cli.reach import records
from agentrein_core.statuses import ApprovalPurpose, ApprovalStatus

if TYPE_CHECKING:
    from agentrein_core.read_models import ApprovalInfo

approvals = typer.Typer(help="Approval requests: list them and decide them.", no_args_is_help=True)

Reviewer = Annotated[
    str | None,
    typer.Option(help="Who decides (resolvedBy); default: the server names the API key, a database the login."),
]


@approvals.command("list")
@targeted
def approvals_list(
    target: Target,
    status: Annotated[
        ApprovalStatus | None,
        typer.Option(metavar="STATUS", help="Only these: PENDING, APPROVED, REJECTED or EXPIRED."),
    ] = None,
    as_json: AsJson = False,
) -> None:
    """Approval requests, pending first and oldest first; under the table, what approving and what rejecting
    each pending one would do."""
    with records(target) as found:
        listed = found.list_approvals(status)
    if as_json:
        print_json([listed_fields(p) for p in listed])
        return
    from agentrein_core.wording import duration

    shown = Listing("approval", "purpose", "status", "agent", "api name", "time left", "summary")
    for p in listed:
        flag = (" (unconfirmed)", "red") if p.unconfirmed else ""
        shown.add_row(
            p.approval_id,
            p.purpose or "",
            Text.assemble(p.status, flag),
            p.agent_id,
            p.api_name,
            duration(p.time_remaining).removesuffix(" left") if p.time_remaining else "—",
            p.payload_summary,
        )
    console.print(shown)
    for p in listed:
        _consequences(p)


def _consequences(info: ApprovalInfo) -> None:
    """What approving and rejecting a pending request would do, as the engine says (the agent's words are
    printed as they are, never as markup)."""
    if info.consequences is None:
        return
    from agentrein_core.wording import more_undos

    console.print(f"{info.approval_id}: {info.description or info.api_name}", markup=False, highlight=False)
    for choice, effect in (("Approve", info.consequences.approve), ("Reject", info.consequences.reject)):
        warning = " (cannot be undone)" if effect.irreversible else ""
        console.print(f"  {choice}{warning}: {effect.summary}", markup=False, highlight=False)
        for step in effect.steps:
            how = f"undone by {step.undo}" if step.undo else f"stays as it is ({step.stays})"
            console.print(f"    #{step.seq} {step.action}: {how}", markup=False, highlight=False)
        if effect.more_steps:
            console.print(f"    {more_undos(effect.more_steps)}", markup=False, highlight=False)


#: What ``approvals list --json`` adds to the fields ``GET /approvals`` lists: what the table shows and prints
#: under it (the server adds them when asked: ``?include=purpose&include=description&…``).
INCLUDED = ("purpose", "description", "consequences", "outcome")


def listed_fields(info: ApprovalInfo) -> dict[str, Any]:
    """The request as ``GET /approvals?include=purpose&include=description&include=consequences&include=outcome``
    answers it."""
    from agentrein_core.read_models import LISTED_FIELDS

    return wire_fields(info, (*LISTED_FIELDS, *INCLUDED))


@approvals.command("approve")
@targeted
def approvals_approve(
    target: Target, approval_id: str, reviewer: Reviewer = None, reason: Annotated[str | None, typer.Option()] = None
) -> None:
    """Approve a pending request; a waiting agent resumes."""
    with records(target) as found:
        _decided(found.decide(approval_id, ApprovalStatus.APPROVED, _reviewer(reviewer, target), reason), target)


@approvals.command("reject")
@targeted
def approvals_reject(
    target: Target,
    approval_id: str,
    reviewer: Reviewer = None,
    reason: Annotated[str | None, typer.Option(help="Told to the agent in ApprovalRejectedError.reason.")] = None,
) -> None:
    """Reject a pending request. What follows depends on its purpose: before execution, the call does not run
    and the session is rolled back; after execution, that one action is undone; an undo in a rollback is
    declined (the action stays as it is), the rollback stops there and the session is marked FAILED."""
    with records(target) as found:
        _decided(found.decide(approval_id, ApprovalStatus.REJECTED, _reviewer(reviewer, target), reason), target)


def _reviewer(given: str | None, target: Target) -> str | None:
    """Who decides: as given; else the server names the API key, and on a database the login is used."""
    return given or (None if target.url else getpass.getuser())


def _decided(info: ApprovalInfo, target: Target) -> None:
    console.print(
        f"{info.approval_id} {info.status} by {info.resolved_by}; action {info.action_id} is now {info.action_status}"
    )
    if info.outcome:
        console.print(info.outcome, markup=False, highlight=False)
    undo_next = (info.purpose, info.status) in {
        (ApprovalPurpose.ROLLBACK, ApprovalStatus.APPROVED),
        (ApprovalPurpose.AFTER_EXECUTION, ApprovalStatus.REJECTED),
    }
    if undo_next and not target.url:
        console.print(
            "The undo runs in the agent's process (its wrapped client), or here: "
            f"`agentrein rollback {info.session_id}`"
        )

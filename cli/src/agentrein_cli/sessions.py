"""Sessions: listed, shown with their actions and intent checks, and rolled back with a progress bar."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated

import typer
from rich.text import Text

from agentrein_cli.common import AsJson, Listing, Target, console, print_json, targeted, when
from agentrein_cli.reach import admin, in_organisation, records, undoing
from agentrein_core.statuses import ApprovalPurpose, ApprovalStatus, Role, RollbackStatus, UndoStatus

if TYPE_CHECKING:
    from datetime import datetime

    from agentrein._port import Mode
    from agentrein_core.model import Action, Rollback
    from agentrein_core.read_models import RollbackInfo, SessionInfo
    from agentrein_core.settings_undo import SettingsUndoExecutor

sessions = typer.Typer(help="Sessions and their actions.", no_args_is_help=True)

#: How long one look at a running rollback waits for it to move.
POLL = 0.25


@sessions.command("list")
@targeted
def sessions_list(
    target: Target, limit: Annotated[int, typer.Option(min=1, max=1000)] = 50, as_json: AsJson = False
) -> None:
    """The newest sessions with their display status."""
    with records(target) as found:
        listed = found.list_sessions(limit)
    if as_json:
        from agentrein_core.converter import to_wire

        print_json(to_wire(listed))  # each as GET /sessions lists it
        return
    shown = Listing("session", "agent", "display status", "actions", "created", "intent")
    for s in listed:
        shown.add_row(s.id, s.agent_id, s.display_status, str(s.action_count), when(s.created_at), s.intent)
    console.print(shown)


@sessions.command("show")
@targeted
def sessions_show(target: Target, session_id: str, as_json: AsJson = False) -> None:
    """One session: its status and its actions in order."""
    with records(target) as found:
        s = found.get_session(session_id)
    if as_json:
        from agentrein_core.converter import to_wire

        print_json(to_wire(s))  # as GET /sessions/{id} answers it
        return
    from agentrein_core import wording as words

    status = words.session(s)
    why = f" ({status.why})" if status.why else ""
    console.print(
        Text.assemble((s.id, "bold"), f"  agent {s.agent_id}  status ", (status.text, "bold"), f"{why} [{s.status}]")
    )
    console.print(Text(f"intent: {s.intent}"))
    console.print(actions_table(s))
    if s.approvals:
        asked = Listing("approval", "action", "purpose", "status", "decided by", "reason", title="Approvals")
        seqs = {a.action_id: f"#{a.seq}" for a in s.actions}
        for p in s.approvals:
            asked.add_row(
                p.approval_id,
                seqs.get(p.action_id, p.action_id),
                PURPOSE[p.purpose],
                words.approval(p).text,
                p.resolved_by or "—",
                p.reason or "—",
            )
        console.print(asked)
    checks = [(f"#{a.seq} {a.api_name}", a.verification) for a in s.actions if a.verification is not None]
    if s.verification is not None:
        checks.append(("the session", s.verification))
    if checks:
        shown = Listing("intent check", "outcome", "verifier", "rationale")
        for subject, check in checks:
            shown.add_row(subject, check.outcome or "waiting", check.verifier, check.rationale)
        console.print(shown)


#: What each kind of approval asks, in the dashboard's words.
PURPOSE = {
    ApprovalPurpose.BEFORE_EXECUTION: "before the call runs",
    ApprovalPurpose.AFTER_EXECUTION: "review after it ran",
    ApprovalPurpose.ROLLBACK: "an undo in a rollback",
}


def actions_table(session: SessionInfo, *, last_first: bool = False, title: str | None = None) -> Listing:
    """The session's actions in the order they were made (``last_first``: the order a rollback undoes them
    in): each in its connector's words, how its call and its undo stand in the dashboard's (the stored values
    in brackets), and why: the error a call or an undo failed with, or what the status alone leaves unsaid."""
    from agentrein_core import wording as words
    from agentrein_core.plugins import installed_connectors

    connectors = installed_connectors()
    shown = Listing("seq", "api name", "action", "call", "undo", "why", title=title or f"Actions of {session.id}")
    for action in sorted(session.actions, key=lambda a: a.seq, reverse=last_first):
        said = words.words_of(connectors.find(action.connector), action)
        undo = words.undo(action, sandbox=session.sandbox)
        how = f": {said.undo.how}" if action.undo is not None and not action.undo.is_none else ""
        shown.add_row(
            str(action.seq),
            action.api_name,
            said.description,
            _status(f"{words.call(action).text.removeprefix('Call: ')} [{action.status}]", action.status),
            f"{undo.text.removeprefix('Undo: ')}{how} [{action.undo_status}]",
            action.error or undo.why or "—",
        )
    return shown


def _status(text: str, status: str) -> Text:
    return Text(text, style={"ROLLED_BACK": "yellow", "FAILED": "red", "SUCCESS": "green"}.get(status, ""))


@targeted
def rollback(target: Target, session_id: str) -> None:
    """Roll a session back, last action first: a progress bar over the undo chain, then the outcomes.

    A server runs the inverses itself; on a database this command runs them, through the connectors enabled
    for the organisation (`agentrein connectors enable`). Exit status 1 when the rollback fails."""
    started = _server_rollback(target.url, target, session_id) if target.url else _local_rollback(target, session_id)
    with started as (found, before, job, look):
        job, after = _follow(found, before, job, look)
    from agentrein_core import wording as words

    console.print(actions_table(after, last_first=True, title=f"The rollback of {after.id}, last action first"))
    console.print(f"Session {after.id}: [bold]{words.session(after).text}[/] (display status {after.display_status})")
    then = "" if target.url else f", then `agentrein rollback {after.id}` again"
    for approval in after.approvals:
        if approval.purpose is ApprovalPurpose.ROLLBACK and approval.status is ApprovalStatus.PENDING:
            console.print(
                f"The rollback waits for a reviewer: `agentrein approvals approve {approval.approval_id}`{then}"
            )
    if job.status is RollbackStatus.FAILED:
        console.print(f"[red]error:[/] the rollback failed: {job.error}")
        raise typer.Exit(1)


#: One look at the rollback: how the job stands now (having waited a little for it to move).
Look = Callable[[], "RollbackInfo"]
#: A rollback started: where the session is read, the session as it was before, the job, and how to look.
Started = Iterator[tuple["Mode", "SessionInfo", "Rollback", Look]]


def _follow(found: Mode, before: SessionInfo, job: Rollback, look: Look) -> tuple[Rollback, SessionInfo]:
    """Show the rollback advancing until it has ended or waits for a reviewer: the job and session then. An
    undo it waits on in the agent's process is said above the bar as it is offered and as it is taken."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from agentrein_core import wording as words
    from agentrein_core.rollback import chain

    walk = {a.action_id: a.updated_at for a in chain(job, before.actions)}
    seqs = {a.action_id: a.seq for a in before.actions}
    columns = (TextColumn("undoing"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    said: tuple[str, bool] | None = None  # the undo said, and whether taken (a renewal moves its time only)
    with Progress(*columns, console=console) as progress:
        bar = progress.add_task("undo chain", total=len(walk))
        while True:
            shown = look()
            undo = shown.undo_with_agent
            if undo is not None and (undo.action_id, undo.taken) != said:
                said = (undo.action_id, undo.taken)
                label = words.with_agent(undo)
                progress.console.print(f"#{seqs.get(undo.action_id, '?')}: {label.text} ({label.why})")
            session = found.get_session(before.id)
            progress.update(bar, completed=sum(_through(a, walk) for a in session.actions))
            undoing = any(a.undo_status is UndoStatus.IN_PROGRESS for a in session.actions)
            if shown.status is not RollbackStatus.RUNNING and not undoing:
                return shown, session


def _through(action: Action, walk: dict[str, datetime]) -> bool:
    """Whether the chain has dealt with ``action`` since it started."""
    from agentrein_core.rollback import is_through

    if action.action_id not in walk or action.updated_at == walk[action.action_id]:
        return False
    return is_through(action)


@contextmanager
def _server_rollback(url: str, target: Target, session_id: str) -> Started:
    """The server runs the rollback; each look asks it how the job stands."""
    with records(target) as found, admin(url, target.api_key) as operator:
        before = found.get_session(session_id)
        job = operator.request_rollback(session_id, reason="agentrein rollback")
        yield found, before, job, lambda: operator.get_rollback(session_id, wait=POLL)


@contextmanager
def _local_rollback(target: Target, session_id: str) -> Started:
    """This process runs the rollback as a server would: the core's supervisor, in a thread, through the stored
    connector settings, takes this session's rollback; each look waits a little for it to move."""
    from agentrein_core.supervisor import Supervisor

    with undoing(target) as (engine, undo, org_id):
        found = in_organisation(engine, org_id)
        before = found.get_session(session_id)
        _check_reachable(undo, org_id, before)
        job = engine.rollbacks.request_rollback(
            org_id, session_id, caller_role=Role.OPERATOR, requested_by="cli", trigger="agentrein rollback"
        )
        supervisor = Supervisor(engine, undo, org_id=org_id, runs={session_id}.__contains__, one_thread=True)
        supervisor.start()

        def look() -> RollbackInfo:
            unavailable = supervisor.unavailable(session_id)
            if unavailable is not None:
                raise unavailable
            moved = engine.rollbacks.wait_for_rollback(org_id, session_id, POLL) or job
            return engine.rollbacks.shown(org_id, moved)

        try:
            yield found, before, job, look
        finally:
            supervisor.stop()


def _check_reachable(undo: SettingsUndoExecutor, org_id: str, session: SessionInfo) -> None:
    """Refuse to start a rollback whose inverses would fail here (for want of a connector's settings, say),
    for the reasons the server's undos would fail with."""
    from agentrein_core.errors import RollbackRefusedError
    from agentrein_core.rules import UNDOABLE

    undone = [a for a in session.actions if a.status in UNDOABLE and a.undo and not a.undo.is_none]
    reasons = list(dict.fromkeys(o.reason for o in undo.obstacles(org_id, undone).values()))
    if reasons:
        raise RollbackRefusedError(
            "nothing was rolled back: here inverses run through the organisation's connector settings, and "
            + "; ".join(reasons)
        )
